#include "server/ip_filter.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>
#include <string>

namespace tern::server {

std::optional<Cidr> Cidr::parse(std::string_view text) {
  Cidr cidr;
  std::string_view host = text;
  auto slash = text.find('/');
  cidr.ipv6 = text.find(':') != std::string_view::npos;
  const int max_prefix = cidr.ipv6 ? 128 : 32;
  cidr.prefix = max_prefix;
  if (slash != std::string_view::npos) {
    host = text.substr(0, slash);
    std::string_view bits = text.substr(slash + 1);
    auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), cidr.prefix);
    if (ec != std::errc() || end != bits.data() + bits.size() || bits.empty() || cidr.prefix < 0 ||
        cidr.prefix > max_prefix) {
      return std::nullopt;
    }
  }
  std::string host_text(host);
  if (inet_pton(cidr.ipv6 ? AF_INET6 : AF_INET, host_text.c_str(), cidr.address.data()) != 1) {
    return std::nullopt;
  }
  // Host bits must be zero.
  for (int bit = cidr.prefix; bit < max_prefix; ++bit) {
    if (cidr.address[static_cast<size_t>(bit / 8)] & (0x80 >> (bit % 8))) return std::nullopt;
  }
  return cidr;
}

bool Cidr::contains(const net::InetAddress& addr) const {
  const uint8_t* bytes;
  if (addr.is_ipv6() != ipv6) return false;
  if (ipv6) {
    bytes = reinterpret_cast<const sockaddr_in6*>(addr.sockaddr_ptr())->sin6_addr.s6_addr;
  } else {
    bytes = reinterpret_cast<const uint8_t*>(
        &reinterpret_cast<const sockaddr_in*>(addr.sockaddr_ptr())->sin_addr.s_addr);
  }
  int full = prefix / 8;
  if (std::memcmp(bytes, address.data(), static_cast<size_t>(full)) != 0) return false;
  int rest = prefix % 8;
  if (rest == 0) return true;
  uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (bytes[full] & mask) == (address[static_cast<size_t>(full)] & mask);
}

bool IpFilter::blocked(const net::InetAddress& addr) const {
  for (const Cidr& cidr : blocked_) {
    if (cidr.contains(addr)) return true;
  }
  return false;
}

}  // namespace tern::server
