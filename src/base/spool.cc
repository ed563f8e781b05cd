#include "base/spool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <utility>

namespace tern {

Result<int> open_temp_file(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) return Error{errno, "temp file"};
  // A file system without O_TMPFILE: a named file, unlinked at once.
  std::string name = dir + "/tern-XXXXXX";
  fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) return Error{errno, "temp file"};
  ::unlink(name.c_str());
  return fd;
}

Spool::~Spool() { clear_slow(); }

Spool::Spool(Spool&& other) noexcept { *this = std::move(other); }

Spool& Spool::operator=(Spool&& other) noexcept {
  if (this == &other) return *this;
  clear_slow();
  memory_limit_ = other.memory_limit_;
  temp_dir_ = std::move(other.temp_dir_);
  memory_ = std::move(other.memory_);
  fd_ = std::exchange(other.fd_, -1);
  size_ = std::exchange(other.size_, 0);
  map_ = std::exchange(other.map_, nullptr);
  map_size_ = std::exchange(other.map_size_, 0);
  return *this;
}

void Spool::configure(size_t memory_limit, std::string_view temp_dir) {
  memory_limit_ = memory_limit;
  if (temp_dir_ != temp_dir) temp_dir_.assign(temp_dir);
}

Result<void> Spool::append(std::string_view data) {
  if (data.empty()) return {};
  unmap();
  if (fd_ < 0) {
    if (memory_.size() + data.size() <= memory_limit_) {
      memory_.append(data);
      size_ += data.size();
      return {};
    }
    if (auto spilled = spill(); !spilled) return spilled;
  }
  if (auto written = write_file(data); !written) return written;
  size_ += data.size();
  return {};
}

// Moves what memory holds into a new file; from here on all bytes go there.
Result<void> Spool::spill() {
  Result<int> fd = open_temp_file(temp_dir_);
  if (!fd) return fd.error();
  fd_ = *fd;
  if (auto written = write_file(memory_); !written) {
    ::close(fd_);
    fd_ = -1;
    return written;
  }
  memory_.clear();
  return {};
}

Result<void> Spool::write_file(std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error{errno, "write temp file"};
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

Result<std::string_view> Spool::read(uint64_t offset, size_t max, std::string* scratch) const {
  if (offset >= size_) return std::string_view();
  const size_t n = static_cast<size_t>(std::min<uint64_t>(max, size_ - offset));
  if (fd_ < 0) return std::string_view(memory_).substr(static_cast<size_t>(offset), n);
  scratch->resize(n);
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd_, scratch->data() + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Error{errno, "read temp file"};
    if (r == 0) return Error{EIO, "read temp file"};  // shorter than written
    got += static_cast<size_t>(r);
  }
  return std::string_view(*scratch);
}

Result<std::string_view> Spool::view() {
  if (fd_ < 0) return std::string_view(memory_);
  if (map_ == nullptr) {
    void* map = ::mmap(nullptr, static_cast<size_t>(size_), PROT_READ, MAP_PRIVATE, fd_, 0);
    if (map == MAP_FAILED) return Error{errno, "map temp file"};
    map_ = map;
    map_size_ = static_cast<size_t>(size_);
  }
  return std::string_view(static_cast<const char*>(map_), map_size_);
}

void Spool::unmap() {
  if (map_ == nullptr) return;
  ::munmap(map_, map_size_);
  map_ = nullptr;
  map_size_ = 0;
}

void Spool::clear_slow() {
  unmap();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  size_ = 0;
  memory_.clear();
  if (memory_.capacity() > memory_limit_) std::string().swap(memory_);
}

}  // namespace tern
