#include "net/udp_socket.h"

#include <sys/socket.h>

#include <cerrno>

#include "net/sockets.h"

namespace tern::net {

Result<UdpSocket> UdpSocket::bind(const InetAddress& addr, bool reuse_port) {
  auto fd = sockets::create_udp(addr.family());
  if (!fd) return fd.error();
  Socket socket(*fd);
  if (reuse_port) {
    if (auto r = sockets::set_reuse_port(socket.fd(), true); !r) return r.error();
  }
  if (addr.is_ipv6()) {
    if (auto r = sockets::set_ipv6_only(socket.fd(), true); !r) return r.error();
  }
  if (auto r = sockets::bind(socket.fd(), addr); !r) return r.error();
  return UdpSocket(std::move(socket));
}

Result<UdpSocket> UdpSocket::open(sa_family_t family) {
  auto fd = sockets::create_udp(family);
  if (!fd) return fd.error();
  return UdpSocket(Socket(*fd));
}

InetAddress UdpSocket::local_address() const { return sockets::local_address(socket_.fd()); }

Result<size_t> UdpSocket::send_to(std::string_view data, const InetAddress& peer) {
  for (;;) {
    ssize_t n = ::sendto(socket_.fd(), data.data(), data.size(), MSG_NOSIGNAL, peer.sockaddr_ptr(),
                         peer.socklen());
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) return Error{errno, "sendto"};
  }
}

Result<size_t> UdpSocket::receive_from(char* buf, size_t len, InetAddress* peer) {
  sockaddr_storage storage{};
  for (;;) {
    socklen_t addr_len = sizeof storage;
    ssize_t n = ::recvfrom(socket_.fd(), buf, len, 0, reinterpret_cast<sockaddr*>(&storage),
                           &addr_len);
    if (n >= 0) {
      if (peer) *peer = InetAddress::from_sockaddr(storage);
      return static_cast<size_t>(n);
    }
    if (errno != EINTR) return Error{errno, "recvfrom"};
  }
}

}  // namespace tern::net
