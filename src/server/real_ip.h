// The real client of a request that came through proxies (nginx's realip):
// when the connection's client is in one of the trusted networks (load
// balancers, a CDN), the address they name becomes the request's client.
//
//   real_ip = { from = ["10.0.0.0/8"], header = "X-Forwarded-For" }
//
// X-Forwarded-For is read from its last entry back (each proxy appends
// the address it received from), past every trusted one: the first that
// is not trusted is the client; if all are, the first of the list. With
// recursive = false, the last entry, trusted or not. X-Real-IP names one
// address. "proxy_protocol" reads no field: the connection's client is the
// one its PROXY protocol header named (net/proxy_protocol.h), which a
// listener marked proxy_protocol reads from the same `from` networks.
// Fields from a client that is not trusted are ignored, and an entry that
// is not an IP address ends the walk where it stands.
//
// Immutable once built; any thread.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "http/request.h"
#include "net/inet_address.h"
#include "server/ip_filter.h"

namespace tern::server {

struct RealIpConfig {
  enum class Source : uint8_t { kXForwardedFor, kXRealIp, kProxyProtocol };
  std::vector<Cidr> from;  // empty: off
  Source source = Source::kXForwardedFor;
  bool recursive = true;
  int line = 0;

  bool enabled() const { return !from.empty(); }
  bool trusts(const net::InetAddress& address) const;
  bool operator==(const RealIpConfig&) const = default;
};

// The request's client under `config`, from `connection_client` (the
// connection's client: its PROXY header's, else its peer).
net::InetAddress real_client(const RealIpConfig& config, const http::Request& request,
                             const net::InetAddress& connection_client);

// An address as X-Forwarded-For and X-Real-IP carry it: "203.0.113.7",
// "2001:db8::7", "[2001:db8::7]"; spaces around it are ignored. Port 0.
std::optional<net::InetAddress> parse_forwarded_address(std::string_view text);

}  // namespace tern::server
