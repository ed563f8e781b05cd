// IpFilter: a set of IPv4 and IPv6 networks (CIDR), for refusing connections
// from blocked addresses at accept time.
//
// Immutable once built; any thread may call contains(). A reload builds a new
// filter and swaps it in.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "net/inet_address.h"

namespace tern::server {

struct Cidr {
  bool ipv6 = false;
  std::array<uint8_t, 16> address{};  // network byte order; IPv4 uses the first 4
  int prefix = 0;                     // bits

  // "10.0.0.0/8", "192.168.1.7" (a /32), "2001:db8::/32", "::1". The host
  // bits must be zero ("10.0.0.1/8" is rejected as a likely typo).
  static std::optional<Cidr> parse(std::string_view text);
  bool contains(const net::InetAddress& addr) const;
  bool operator==(const Cidr&) const = default;
};

// One of an ordered list of allow and deny rules (a location's `access`).
struct AccessRule {
  bool allow = false;
  std::optional<Cidr> network;  // none: every address ("all")
  bool operator==(const AccessRule&) const = default;
};

class IpFilter {
 public:
  IpFilter() = default;
  explicit IpFilter(std::vector<Cidr> blocked) : blocked_(std::move(blocked)) {}

  bool blocked(const net::InetAddress& addr) const;
  bool empty() const { return blocked_.empty(); }
  size_t size() const { return blocked_.size(); }

 private:
  std::vector<Cidr> blocked_;
};

}  // namespace tern::server
