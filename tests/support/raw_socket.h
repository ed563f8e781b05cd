// Test support: a blocking TCP client made of plain system calls, so that the
// code under test is checked against something that does not share its code.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tern::testing {

// Gives the socket `fd` a send buffer of more than `bytes` (as a reader
// faster than the writer would leave it room); false where the process may
// not (SO_SNDBUFFORCE needs CAP_NET_ADMIN).
inline bool force_send_room(int fd, size_t bytes) {
  const int wanted = 64 * 1024 * 1024;
  int got = 0;
  socklen_t len = sizeof got;
  return ::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &wanted, sizeof wanted) == 0 &&
         ::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &got, &len) == 0 && static_cast<size_t>(got) > bytes;
}

// Data segments the socket `fd` has received (tcpi_data_segs_in, Linux 4.6):
// a segment the sender built, since loopback delivers each whole. glibc's
// struct tcp_info stops before that field, so it is read at its offset in
// the kernel's (include/uapi/linux/tcp.h, which only grows at its end).
// -1 where the kernel gives no such field.
inline long data_segments_received(int fd) {
  constexpr size_t kDataSegsInOffset = 152;
  unsigned char info[256] = {};
  socklen_t len = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, info, &len) != 0 || len < kDataSegsInOffset + 4) return -1;
  uint32_t segments = 0;
  std::memcpy(&segments, info + kDataSegsInOffset, sizeof segments);
  return segments;
}

// A socket listening on 127.0.0.1 (a free port, or `port`) that nobody
// accepts from: an address held, or, with a backlog of 0 and its queue
// filled, a server that answers no SYN. fd() < 0 on failure.
class RawListener {
 public:
  explicit RawListener(int backlog, uint16_t port = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, backlog) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ::close(fd_);
      fd_ = -1;
      return;
    }
    port_ = ntohs(addr.sin_port);
  }
  ~RawListener() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawListener(const RawListener&) = delete;
  RawListener& operator=(const RawListener&) = delete;

  int fd() const { return fd_; }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

class RawClient {
 public:
  // Connects to 127.0.0.1:port; fd() < 0 on failure.
  explicit RawClient(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  int fd() const { return fd_; }
  bool ok() const { return fd_ >= 0; }

  bool send_all(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }

  // Closes with a reset (RST) instead of an end of stream (FIN).
  void reset() {
    const linger abort{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
    ::close(fd_);
    fd_ = -1;
  }

  // Reads until `len` bytes, EOF, error or timeout.
  std::string read_exactly(size_t len, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::string out;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (out.size() < len) {
      if (!wait_readable(deadline)) break;
      char buf[65536];
      size_t want = std::min(sizeof buf, len - out.size());
      ssize_t n = ::recv(fd_, buf, want, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

  // Reads until EOF (or error, or timeout). *eof says whether EOF was seen.
  std::string read_to_eof(bool* eof = nullptr,
                          std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::string out;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    if (eof) *eof = false;
    for (;;) {
      if (!wait_readable(deadline)) return out;
      char buf[65536];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n == 0 && eof) *eof = true;
      if (n <= 0) return out;
      out.append(buf, static_cast<size_t>(n));
    }
  }

 private:
  bool wait_readable(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      int r = ::poll(&p, 1, static_cast<int>(left.count()));
      if (r > 0) return true;
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) return false;
      return false;
    }
  }

  int fd_ = -1;
};

}  // namespace tern::testing
