#include "net/sockets.h"

#include <linux/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace tern::net::sockets {
namespace {

Result<void> set_int_option(int fd, int level, int name, int value, const char* what) {
  if (::setsockopt(fd, level, name, &value, sizeof value) != 0) return Error{errno, what};
  return {};
}

Result<int> create(sa_family_t family, int type, const char* what) {
  int fd = ::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error{errno, what};
  return fd;
}

}  // namespace

Result<int> create_tcp(sa_family_t family) { return create(family, SOCK_STREAM, "socket(tcp)"); }

Result<int> create_udp(sa_family_t family) { return create(family, SOCK_DGRAM, "socket(udp)"); }

Result<void> bind(int fd, const InetAddress& addr) {
  if (::bind(fd, addr.sockaddr_ptr(), addr.socklen()) != 0) return Error{errno, "bind"};
  return {};
}

Result<void> listen(int fd, int backlog) {
  if (::listen(fd, backlog) != 0) return Error{errno, "listen"};
  return {};
}

int accept(int listen_fd, InetAddress* peer, int* saved_errno) {
  sockaddr_storage storage;
  for (;;) {
    socklen_t len = sizeof storage;
    int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&storage), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      if (peer) *peer = InetAddress::from_sockaddr(storage);
      return fd;
    }
    int err = errno;
    // ECONNABORTED: the peer gave up while queued; try the next one.
    if (err == EINTR || err == ECONNABORTED) continue;
    *saved_errno = err;
    return -1;
  }
}

int connect(int fd, const SocketAddress& addr) {
  int rc = ::connect(fd, addr.sockaddr_ptr(), addr.socklen());
  // A non-blocking connect interrupted by a signal goes on in the background,
  // like EINPROGRESS: calling connect() again would give EALREADY.
  if (rc == 0) return 0;
  int err = errno;
  return err == EINTR ? EINPROGRESS : err;
}

ssize_t read(int fd, void* buf, size_t len, int* saved_errno) {
  for (;;) {
    ssize_t n = ::read(fd, buf, len);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    *saved_errno = errno;
    return -1;
  }
}

ssize_t readv(int fd, const iovec* iov, int iovcnt, int* saved_errno) {
  for (;;) {
    ssize_t n = ::readv(fd, iov, iovcnt);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    *saved_errno = errno;
    return -1;
  }
}

ssize_t write(int fd, const void* buf, size_t len, int* saved_errno, bool more) {
  const int flags = MSG_NOSIGNAL | (more ? MSG_MORE : 0);
  for (;;) {
    ssize_t n = ::send(fd, buf, len, flags);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    *saved_errno = errno;
    return -1;
  }
}

ssize_t writev(int fd, const iovec* iov, int iovcnt, int* saved_errno) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(iovcnt);
  for (;;) {
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    *saved_errno = errno;
    return -1;
  }
}

ssize_t sendfile(int out_fd, int in_fd, off_t* offset, size_t len, int* saved_errno) {
  for (;;) {
    ssize_t n = ::sendfile(out_fd, in_fd, offset, len);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    *saved_errno = errno;
    return -1;
  }
}

ssize_t send_record(int fd, uint8_t type, const void* buf, size_t len, int* saved_errno) {
  iovec iov{const_cast<void*>(buf), len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof type)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* record = CMSG_FIRSTHDR(&msg);
  record->cmsg_level = SOL_TLS;
  record->cmsg_type = TLS_SET_RECORD_TYPE;
  record->cmsg_len = CMSG_LEN(sizeof type);
  std::memcpy(CMSG_DATA(record), &type, sizeof type);
  for (;;) {
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    *saved_errno = errno;
    return -1;
  }
}

void close(int fd) {
  // Linux releases the descriptor even when close() reports EINTR, so never retry.
  ::close(fd);
}

Result<void> shutdown_write(int fd) {
  if (::shutdown(fd, SHUT_WR) != 0) return Error{errno, "shutdown"};
  return {};
}

int socket_error(int fd) {
  int value = 0;
  socklen_t len = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &len) != 0) return errno;
  return value;
}

InetAddress local_address(int fd) {
  sockaddr_storage storage{};
  socklen_t len = sizeof storage;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &len);
  return InetAddress::from_sockaddr(storage);
}

InetAddress peer_address(int fd) {
  sockaddr_storage storage{};
  socklen_t len = sizeof storage;
  ::getpeername(fd, reinterpret_cast<sockaddr*>(&storage), &len);
  return InetAddress::from_sockaddr(storage);
}

bool is_self_connect(int fd) { return local_address(fd) == peer_address(fd); }

Result<void> set_tcp_nodelay(int fd, bool on) {
  return set_int_option(fd, IPPROTO_TCP, TCP_NODELAY, on ? 1 : 0, "setsockopt(TCP_NODELAY)");
}

void push_pending(int fd) {
  // Clearing TCP_CORK (set or not) sends what TCP holds back.
  const int off = 0;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_CORK, &off, sizeof off);
}

Result<void> set_notsent_lowat(int fd, size_t bytes) {
  const int value = bytes > INT32_MAX ? INT32_MAX : static_cast<int>(bytes);
  return set_int_option(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, value, "setsockopt(TCP_NOTSENT_LOWAT)");
}

Result<void> set_defer_accept(int fd, int seconds) {
  return set_int_option(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, seconds, "setsockopt(TCP_DEFER_ACCEPT)");
}

Result<void> set_keepalive(int fd, bool on) {
  return set_int_option(fd, SOL_SOCKET, SO_KEEPALIVE, on ? 1 : 0, "setsockopt(SO_KEEPALIVE)");
}

Result<void> set_reuse_addr(int fd, bool on) {
  return set_int_option(fd, SOL_SOCKET, SO_REUSEADDR, on ? 1 : 0, "setsockopt(SO_REUSEADDR)");
}

Result<void> set_reuse_port(int fd, bool on) {
  return set_int_option(fd, SOL_SOCKET, SO_REUSEPORT, on ? 1 : 0, "setsockopt(SO_REUSEPORT)");
}

Result<void> set_ipv6_only(int fd, bool on) {
  return set_int_option(fd, IPPROTO_IPV6, IPV6_V6ONLY, on ? 1 : 0, "setsockopt(IPV6_V6ONLY)");
}

}  // namespace tern::net::sockets
