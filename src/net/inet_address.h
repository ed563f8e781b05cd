// An IPv4 or IPv6 socket address. Value type; any thread.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace tern::net {

// An IPv4 or IPv6 address and a port, held as the sockaddr the kernel takes.
class InetAddress {
 public:
  // 0.0.0.0:port (or 127.0.0.1 with loopback_only); [::]:port / [::1] with ipv6.
  explicit InetAddress(uint16_t port = 0, bool loopback_only = false, bool ipv6 = false);
  // The address and port an IPv4 or IPv6 sockaddr holds.
  explicit InetAddress(const sockaddr_in& addr) : addr4_(addr) {}
  explicit InetAddress(const sockaddr_in6& addr) : addr6_(addr) {}

  // A numeric address and a port: ("127.0.0.1", 80), ("::1", 80).
  static Result<InetAddress> from_ip_port(std::string_view ip, uint16_t port);
  // "127.0.0.1:8080", "[::1]:8080", "*:8080" (any IPv4 address). No DNS.
  static Result<InetAddress> parse(std::string_view host_port);
  // Builds from what accept()/getpeername() filled in.
  static InetAddress from_sockaddr(const sockaddr_storage& storage);

  sa_family_t family() const { return addr4_.sin_family; }  // AF_INET or AF_INET6
  bool is_ipv6() const { return family() == AF_INET6; }    // an IPv6 address
  uint16_t port() const;                                    // in host byte order
  void set_port(uint16_t port);                             // in host byte order

  std::string to_ip() const;       // "127.0.0.1", "::1"
  // The same into `out` (room for INET6_ADDRSTRLEN), without allocating;
  // its length.
  size_t to_ip(char* out) const;
  std::string to_ip_port() const;  // "127.0.0.1:80", "[::1]:80"

  // The sockaddr and its length, for bind(), connect() and sendto().
  const sockaddr* sockaddr_ptr() const { return reinterpret_cast<const sockaddr*>(&addr6_); }
  socklen_t socklen() const {
    return is_ipv6() ? static_cast<socklen_t>(sizeof addr6_) : static_cast<socklen_t>(sizeof addr4_);
  }

  // 127.0.0.0/8, the IPv6 loopback, or an IPv4-mapped address in 127.0.0.0/8.
  bool is_loopback() const;
  // 0.0.0.0 or :: (a listener's "every address").
  bool is_any() const;
  // A connection whose own address is `local` came in on this listening
  // address: the same, or this is the wildcard of its port and family.
  bool covers(const InetAddress& local) const {
    return *this == local || (is_any() && port() == local.port() && family() == local.family());
  }
  // The same IP address, whatever the ports (an IPv4 address and its
  // IPv4-mapped IPv6 form are the same).
  bool same_ip(const InetAddress& other) const;

  friend bool operator==(const InetAddress& a, const InetAddress& b);  // the same family, address and port

 private:
  union {
    sockaddr_in addr4_;
    sockaddr_in6 addr6_;
  };
};

}  // namespace tern::net
