// Test support: an OutputStream that keeps what is written in memory, file
// regions read in, so a ResponseWriter (and the handlers behind it) can be
// tested without a socket. Loop thread of the test, like any stream.
#pragma once

#include <unistd.h>

#include <string>

#include "net/buffer.h"
#include "net/output_stream.h"

namespace tern::testing {

class MemoryOutput final : public net::OutputStream {
 public:
  net::Buffer& output_tail_buffer() override { return buffer_; }
  void send_file(net::FileRegion region) override {
    if (region.memory != nullptr) {
      buffer_.append(region.memory + region.offset, region.length);
      return;
    }
    std::string bytes(region.length, '\0');
    const ssize_t n = ::pread(region.fd, bytes.data(), bytes.size(), region.offset);
    bytes.resize(n > 0 ? static_cast<size_t>(n) : 0);
    buffer_.append(bytes);
  }
  // Everything written so far, taken out.
  std::string take() { return buffer_.retrieve_all_as_string(); }

 private:
  net::Buffer buffer_;
};

}  // namespace tern::testing
