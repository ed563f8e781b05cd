// The upstream side of Config: [[upstream]] groups, their servers (by
// address or by name) and TLS, and a location's `proxy` (config.h).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "http1/response_parser.h"
#include "server/config/cache_config.h"
#include "net/socket_address.h"
#include "upstream/health_options.h"

namespace tern::server {

// One server of an [[upstream]] group.
struct UpstreamServerConfig {
  std::string address_text;  // as written: "127.0.0.1:3000", "unix:/run/app.sock", "app:3000"
  net::SocketAddress address = net::InetAddress();
  // A DNS name ("app" of "app:3000"): every address it resolves to is a
  // server of the group, each with this one's settings; empty: `address`.
  std::string host;
  uint16_t port = 0;
  unsigned weight = 1;
  bool backup = false;  // only while no other server is available
  unsigned max_fails = 1;  // failures within fail_timeout that take it out; 0: never
  std::chrono::milliseconds fail_timeout{10000};
  bool operator==(const UpstreamServerConfig&) const = default;
};

// TLS to an upstream (a proxy's "https://" pass, and its `tls` table).
struct UpstreamTlsConfig {
  // The name sent as SNI and looked for in the certificate; empty: the
  // group's name, or the address's IP (matched, not sent).
  std::string name;
  bool verify = true;
  std::string ca;    // PEM file of trusted CAs; empty: the system's
  std::string cert;  // a client certificate and its key; empty: none
  std::string key;
  bool operator==(const UpstreamTlsConfig&) const = default;
};

// One [[upstream]]: a group of HTTP servers a location's proxy names.
struct UpstreamConfig {
  std::string name;
  std::vector<UpstreamServerConfig> servers;
  enum class Method { kRoundRobin, kLeastConnections, kHash } method = Method::kRoundRobin;
  // kHash: "$remote_addr", "$request_uri", "$http_NAME" or "$cookie_NAME".
  std::string hash = "$remote_addr";
  // Per worker and server: connections kept open while idle (nginx's
  // keepalive: a cache, not a cap), and a cap on all of them, busy or idle
  // (0: none; with one, requests beyond it wait in `queue`).
  size_t keepalive = 64;
  size_t connections = 0;
  size_t queue = 256;       // requests waiting for one, per worker and server
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds queue_timeout{10000};
  std::optional<upstream::HealthOptions> health;  // active health checks
  // 1 or 2 ("v1", "v2"): connections to the servers begin with a PROXY
  // protocol header naming the client; 0: none.
  int proxy_protocol = 0;
  // Set on the proxy's copy of a group for the locations that pass to it
  // over "https://" (ProxyRoutes): its servers speak TLS.
  std::optional<UpstreamTlsConfig> tls{};
  std::string file;  // the file it was read from (an included one)
  int line = 0;
  bool operator==(const UpstreamConfig&) const = default;
};

// A location's `proxy`: its requests go to an upstream HTTP/1.1 server.
struct ProxyConfig {
  std::string pass;   // "http[s]://GROUP_OR_ADDRESS[/path]", as written
  std::string group;  // the [[upstream]] it names, or its address ("127.0.0.1:3000")
  // With a path in `pass`, the location's prefix is replaced by it (nginx's
  // proxy_pass with a URI); without, the request's target goes as sent.
  std::optional<std::string> path;
  std::string host;  // the Host sent; empty: the client's
  // Fields of the forwarded request: set (replacing the client's and
  // tern's own of the name) and taken out.
  std::vector<std::pair<std::string, std::string>> set_headers;
  std::vector<std::string> remove_headers;
  // The location's own connect timeout (nginx's proxy_connect_timeout);
  // unset: the group's. A location with one has connections of its own.
  std::optional<std::chrono::milliseconds> connect_timeout;
  std::chrono::milliseconds read_timeout{60000};  // for the first byte, and between two
  std::chrono::milliseconds send_timeout{60000};  // between two steps of writing the request
  bool request_buffering = true;
  bool response_buffering = true;
  size_t response_buffer = 64 * 1024;
  uint64_t max_temp_file = uint64_t{1} << 30;
  http::ResponseParser::Limits response_head;  // as FastCgiConfig's
  // A failed attempt goes on to another server: with no connection, a
  // connection closed ("error") or no answer in time ("timeout") before
  // a response, and these statuses (not relayed); for a request that is
  // not idempotent only with next_non_idempotent.
  bool next_upstream = true;
  bool next_on_error = true;
  bool next_on_timeout = true;
  std::vector<int> next_on_status;
  bool next_non_idempotent = false;
  unsigned next_upstream_tries = 0;  // 0: every server once
  std::chrono::milliseconds next_upstream_timeout{0};  // 0: no bound
  bool redirect = true;  // Location "http://GROUP/path..." becomes "PREFIX..."
  std::optional<UpstreamTlsConfig> tls{};  // "https://": set, from the `tls` table
  std::optional<CacheUseConfig> cache;     // responses kept in a [[cache]]
  int line = 0;
  bool operator==(const ProxyConfig&) const = default;
};

}  // namespace tern::server
