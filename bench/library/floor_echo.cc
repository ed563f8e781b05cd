// floor_echo: the floor of the library comparison (README.md), the least
// work an echo server can do on this kernel: no library, one epoll set per
// thread, level-triggered.
//
//   floor_echo --port 0 --threads 2
//
// A readable connection is read into one 64 KiB buffer of the thread and
// written straight back. What the socket does not take is kept for the
// connection, which then waits for room (EPOLLOUT) and reads nothing more
// until it is gone: the echo's order holds and nothing grows without bound.
// It has no timers: the timer row has no floor.
//
// --threads T > 1: one epoll set per thread, each with its own listener on
// the same port (SO_REUSEPORT), as the other servers do.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "echo_common.h"

namespace {

struct Connection {
  int fd;
  std::string pending;  // echoed bytes the socket has not taken yet
};

void watch(int epoll_fd, int op, Connection* conn, uint32_t events) {
  epoll_event event{};
  event.events = events;
  event.data.ptr = conn;
  ::epoll_ctl(epoll_fd, op, conn->fd, &event);
}

void close_connection(Connection* conn) {
  ::close(conn->fd);  // leaves the epoll set with its last descriptor
  delete conn;
}

void accept_all(int epoll_fd, int listener) {
  for (;;) {
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or an error the next connection may not have
    const int on = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    watch(epoll_fd, EPOLL_CTL_ADD, new Connection{fd, {}}, EPOLLIN);
  }
}

// Writes what it can of data; keeps the rest and waits for room. False when
// the connection failed (and is closed).
bool echo(int epoll_fd, Connection* conn, const char* data, size_t length) {
  ssize_t written = ::send(conn->fd, data, length, MSG_NOSIGNAL);
  if (written < 0) {
    if (errno != EAGAIN) return false;
    written = 0;
  }
  if (static_cast<size_t>(written) == length) return true;
  conn->pending.assign(data + written, length - static_cast<size_t>(written));
  watch(epoll_fd, EPOLL_CTL_MOD, conn, EPOLLOUT);
  return true;
}

void on_readable(int epoll_fd, Connection* conn, char* buffer, size_t size) {
  const ssize_t n = ::read(conn->fd, buffer, size);
  if (n == 0 || (n < 0 && errno != EAGAIN) || (n > 0 && !echo(epoll_fd, conn, buffer, static_cast<size_t>(n)))) {
    close_connection(conn);
  }
}

void on_writable(int epoll_fd, Connection* conn) {
  const ssize_t n = ::send(conn->fd, conn->pending.data(), conn->pending.size(), MSG_NOSIGNAL);
  if (n < 0 && errno != EAGAIN) return close_connection(conn);
  if (n > 0) conn->pending.erase(0, static_cast<size_t>(n));
  if (conn->pending.empty()) watch(epoll_fd, EPOLL_CTL_MOD, conn, EPOLLIN);
}

void serve(int listener) {
  const int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.ptr = nullptr;  // the listener
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listener, &event);
  std::vector<char> buffer(64 * 1024);
  epoll_event ready[256];
  for (;;) {
    const int count = ::epoll_wait(epoll_fd, ready, 256, -1);
    for (int i = 0; i < count; ++i) {
      auto* conn = static_cast<Connection*>(ready[i].data.ptr);
      if (conn == nullptr) {
        accept_all(epoll_fd, listener);
      } else if (!conn->pending.empty()) {
        on_writable(epoll_fd, conn);
      } else {
        on_readable(epoll_fd, conn, buffer.data(), buffer.size());
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  echo_bench::Flags flags;
  if (!echo_bench::parse_flags(argc, argv, &flags)) return 2;
  if (flags.timers > 0) {
    std::fprintf(stderr, "floor_echo: no timers (the floor is an echo only)\n");
    return 2;
  }
  int port = flags.port;
  const std::vector<int> listeners = echo_bench::listen_all(flags.threads, &port, "floor_echo");
  if (listeners.empty()) return 1;
  echo_bench::announce(port);
  std::vector<std::thread> threads;
  for (size_t i = 1; i < listeners.size(); ++i) threads.emplace_back(serve, listeners[i]);
  serve(listeners[0]);
}
