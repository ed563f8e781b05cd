#include "net/inet_address.h"

#include <arpa/inet.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace tern::net {

InetAddress::InetAddress(uint16_t port, bool loopback_only, bool ipv6) {
  std::memset(&addr6_, 0, sizeof addr6_);
  if (ipv6) {
    addr6_.sin6_family = AF_INET6;
    addr6_.sin6_addr = loopback_only ? in6addr_loopback : in6addr_any;
    addr6_.sin6_port = htons(port);
  } else {
    addr4_.sin_family = AF_INET;
    addr4_.sin_addr.s_addr = htonl(loopback_only ? INADDR_LOOPBACK : INADDR_ANY);
    addr4_.sin_port = htons(port);
  }
}

Result<InetAddress> InetAddress::from_ip_port(std::string_view ip, uint16_t port) {
  char text[INET6_ADDRSTRLEN];
  if (ip.empty() || ip.size() >= sizeof text) return Error{EINVAL, "parse address"};
  std::memcpy(text, ip.data(), ip.size());
  text[ip.size()] = '\0';

  InetAddress addr;
  std::memset(&addr.addr6_, 0, sizeof addr.addr6_);
  if (inet_pton(AF_INET, text, &addr.addr4_.sin_addr) == 1) {
    addr.addr4_.sin_family = AF_INET;
    addr.addr4_.sin_port = htons(port);
    return addr;
  }
  if (inet_pton(AF_INET6, text, &addr.addr6_.sin6_addr) == 1) {
    addr.addr6_.sin6_family = AF_INET6;
    addr.addr6_.sin6_port = htons(port);
    return addr;
  }
  return Error{EINVAL, "parse address"};
}

Result<InetAddress> InetAddress::parse(std::string_view host_port) {
  std::string_view host;
  std::string_view port_text;
  if (!host_port.empty() && host_port.front() == '[') {
    auto close = host_port.find(']');
    if (close == std::string_view::npos || close + 1 >= host_port.size() ||
        host_port[close + 1] != ':') {
      return Error{EINVAL, "parse address"};
    }
    host = host_port.substr(1, close - 1);
    port_text = host_port.substr(close + 2);
    if (host.find(':') == std::string_view::npos) return Error{EINVAL, "parse address"};
  } else {
    auto colon = host_port.rfind(':');
    if (colon == std::string_view::npos) return Error{EINVAL, "parse address"};
    host = host_port.substr(0, colon);
    port_text = host_port.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return Error{EINVAL, "parse address"};
  }
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535 ||
      port_text.empty()) {
    return Error{EINVAL, "parse port"};
  }
  if (host == "*" || host.empty()) return InetAddress(static_cast<uint16_t>(port));
  return from_ip_port(host, static_cast<uint16_t>(port));
}

InetAddress InetAddress::from_sockaddr(const sockaddr_storage& storage) {
  InetAddress addr;
  if (storage.ss_family == AF_INET6) {
    std::memcpy(&addr.addr6_, &storage, sizeof addr.addr6_);
  } else if (storage.ss_family == AF_INET) {
    std::memcpy(&addr.addr4_, &storage, sizeof addr.addr4_);
  }  // other families (AF_UNIX): 0.0.0.0:0
  return addr;
}

uint16_t InetAddress::port() const {
  return ntohs(is_ipv6() ? addr6_.sin6_port : addr4_.sin_port);
}

void InetAddress::set_port(uint16_t port) {
  if (is_ipv6()) {
    addr6_.sin6_port = htons(port);
  } else {
    addr4_.sin_port = htons(port);
  }
}

std::string InetAddress::to_ip() const {
  char text[INET6_ADDRSTRLEN];
  return std::string(text, to_ip(text));
}

size_t InetAddress::to_ip(char* text) const {
  if (is_ipv6()) {
    if (inet_ntop(AF_INET6, &addr6_.sin6_addr, text, INET6_ADDRSTRLEN) == nullptr) return 0;
    return strlen(text);
  }
  // Dotted decimal by hand: inet_ntop formats through printf, and the proxy
  // writes a client's address into every request it forwards.
  const auto* bytes = reinterpret_cast<const unsigned char*>(&addr4_.sin_addr.s_addr);
  char* out = text;
  for (int i = 0; i < 4; ++i) {
    unsigned v = bytes[i];
    if (v >= 100) *out++ = static_cast<char>('0' + v / 100);
    if (v >= 10) *out++ = static_cast<char>('0' + v / 10 % 10);
    *out++ = static_cast<char>('0' + v % 10);
    if (i < 3) *out++ = '.';
  }
  return static_cast<size_t>(out - text);
}

std::string InetAddress::to_ip_port() const {
  std::string s = is_ipv6() ? "[" + to_ip() + "]" : to_ip();
  s += ':';
  s += std::to_string(port());
  return s;
}

namespace {

// The IPv4 address in network order of an IPv4 or IPv4-mapped IPv6 address.
bool ipv4_of(const sockaddr_in& v4, const sockaddr_in6& v6, bool is_v6, uint32_t* out) {
  if (!is_v6) {
    *out = v4.sin_addr.s_addr;
    return true;
  }
  if (!IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr)) return false;
  std::memcpy(out, &v6.sin6_addr.s6_addr[12], sizeof *out);
  return true;
}

}  // namespace

bool InetAddress::is_loopback() const {
  uint32_t v4 = 0;
  if (ipv4_of(addr4_, addr6_, is_ipv6(), &v4)) return (ntohl(v4) >> 24) == 127;
  return IN6_IS_ADDR_LOOPBACK(&addr6_.sin6_addr);
}

bool InetAddress::is_any() const {
  if (!is_ipv6()) return addr4_.sin_addr.s_addr == htonl(INADDR_ANY);
  return IN6_IS_ADDR_UNSPECIFIED(&addr6_.sin6_addr);
}

bool InetAddress::same_ip(const InetAddress& other) const {
  uint32_t a = 0, b = 0;
  const bool a4 = ipv4_of(addr4_, addr6_, is_ipv6(), &a);
  const bool b4 = ipv4_of(other.addr4_, other.addr6_, other.is_ipv6(), &b);
  if (a4 || b4) return a4 && b4 && a == b;
  return std::memcmp(&addr6_.sin6_addr, &other.addr6_.sin6_addr, sizeof(in6_addr)) == 0;
}

bool operator==(const InetAddress& a, const InetAddress& b) {
  if (a.family() != b.family() || a.port() != b.port()) return false;
  if (a.is_ipv6()) {
    return std::memcmp(&a.addr6_.sin6_addr, &b.addr6_.sin6_addr, sizeof(in6_addr)) == 0;
  }
  return a.addr4_.sin_addr.s_addr == b.addr4_.sin_addr.s_addr;
}

}  // namespace tern::net
