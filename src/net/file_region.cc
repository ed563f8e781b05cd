#include "net/file_region.h"

#include <sys/mman.h>
#include <unistd.h>

#include <utility>

namespace tern::net {
namespace {

class Mapping {
 public:
  Mapping(void* address, size_t span, std::shared_ptr<const void> held)
      : address_(address), span_(span), held_(std::move(held)) {}
  ~Mapping() { ::munmap(address_, span_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

 private:
  void* address_;
  size_t span_;
  std::shared_ptr<const void> held_;  // released after the unmapping
};

}  // namespace

bool map_file_region(FileRegion* region) {
  static const off_t page = static_cast<off_t>(::sysconf(_SC_PAGESIZE));
  if (region->length == 0 || region->memory != nullptr || region->fd < 0) return false;
  const off_t start = region->offset - region->offset % page;
  const size_t span = region->length + static_cast<size_t>(region->offset - start);
  void* map = ::mmap(nullptr, span, PROT_READ, MAP_PRIVATE, region->fd, start);
  if (map == MAP_FAILED) return false;
  // The mapping holds the file's pages; what the region held (an open-file
  // cache entry) goes with it, once the mapping is let go of.
  region->keep_alive = std::make_shared<const Mapping>(map, span, std::move(region->keep_alive));
  region->memory = static_cast<const char*>(map);
  region->offset -= start;
  return true;
}

}  // namespace tern::net
