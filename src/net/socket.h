// Socket: owns one file descriptor and closes it when destroyed.
// Movable, not copyable. Used by one thread at a time.
#pragma once

#include <utility>

namespace tern::net {

class Socket {
 public:
  Socket() = default;                       // none
  explicit Socket(int fd) : fd_(fd) {}      // takes ownership of `fd`
  ~Socket() { reset(); }

  // Takes the other's fd (closing its own first); the other is left with none.
  Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Socket& operator=(Socket&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }

  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }           // -1 when none
  bool valid() const { return fd_ >= 0; }  // holds an fd
  // Gives up ownership without closing.
  int release() { return std::exchange(fd_, -1); }
  // Closes the fd now (if any) and takes `fd` instead.
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

}  // namespace tern::net
