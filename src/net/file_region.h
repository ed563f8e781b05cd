// FileRegion: part of an open file queued on a connection, and how its bytes
// can leave: sendfile(2) from the descriptor, or write(2) from a read-only
// mapping of it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>

namespace tern::net {

// A region of an open file to send with sendfile(2), or of memory (a file
// mapped with mmap) to send with write(2) when `memory` is set. `keep_alive`
// (optional) is held until the region has been sent or the connection
// closed, so the fd or mapping stays valid that long; an open-file cache
// hands out its entry here.
struct FileRegion {
  int fd = -1;                             // the file (not owned)
  off_t offset = 0;      // into the file, or into `memory`
  size_t length = 0;                       // bytes to send
  const char* memory = nullptr;            // the file mapped, when set
  std::shared_ptr<const void> keep_alive;  // held while the region is sent
};

// Maps the region's bytes read-only and points it at the mapping (which it
// then keeps alive, along with what it kept before); false, and the region
// unchanged, if it has no bytes, is mapped already or mmap fails.
//
// Only the kernel reads a mapped region (write copies from it): a file cut
// short while it is sent makes that write fail with EFAULT, and the
// connection close, where a read of the mapping in user space would raise
// SIGBUS.
bool map_file_region(FileRegion* region);

}  // namespace tern::net
