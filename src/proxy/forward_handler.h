// ForwardHandler: the requests beneath a prefix on HttpServer's chain,
// forwarded to upstream HTTP/1.1 servers (a reverse proxy):
//
//   proxy::ForwardHandlerOptions api;
//   api.servers = {net::InetAddress::parse("127.0.0.1:3000").value()};
//   api.prefix = "/api/";
//   server.add_handler(std::make_unique<proxy::ForwardHandler>(api));
//
// The request goes on as write_forward_head() makes it (forward_head.h:
// hop-by-hop fields out; X-Forwarded-For, -Proto, -Host, Forwarded and Via
// in), with its target as the client sent it, or with the prefix replaced
// by `path` ("/api/users?page=2" with the path "/v1/" is
// "/v1/users?page=2", nginx's proxy_pass with a URI). Several servers take
// requests in turn; a server that cannot be reached or fails before
// answering is passed over for the next (an idempotent request only), and
// out of the turn for 10 s. Bodies are buffered as nginx's are by default
// (upstream/call.h): a request's body is gathered before a connection is
// taken (in memory, then a temp file), and a response is read as fast as
// the server sends it while the client takes it at its own pace; with
// `buffering` off both stream through, each side paused while the other
// is behind. An upstream that cannot be reached is 502, one that does not
// answer in time 504.
//
// Each loop keeps its own idle connections to each server (up to
// `connections`). Shared by the loops.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "http/handler.h"
#include "net/socket_address.h"
#include "upstream/group_per_loop.h"

namespace tern::proxy {

// What a ForwardHandler is made with.
struct ForwardHandlerOptions {
  std::vector<net::SocketAddress> servers;  // the upstream servers (TCP or Unix sockets), in turn
  std::string prefix = "/";  // the paths it takes
  std::string path;          // replaces the prefix in the target; empty: the target as sent
  std::string host;          // the Host sent; empty: the client's
  size_t connections = 32;   // idle ones kept per server and loop
  uint64_t max_body = 0;     // a request body's bound (then 413); 0: the server's (HttpLimits)
  std::chrono::milliseconds connect_timeout{5000};  // to a server (then the next, or 502)
  std::chrono::milliseconds read_timeout{60000};  // for each read of the response
  std::chrono::milliseconds send_timeout{60000};  // for each write of the request
  bool buffering = true;  // request and response bodies (see above); false: streamed
  std::string temp_dir = "/tmp";  // for bodies larger than kept in memory
};

class ForwardHandler final : public http::RequestHandler {
 public:
  // Throws std::invalid_argument without servers, or for a prefix or path
  // that does not start with '/'.
  explicit ForwardHandler(ForwardHandlerOptions options);

  ForwardHandler(const ForwardHandler&) = delete;
  ForwardHandler& operator=(const ForwardHandler&) = delete;

  // A path beneath the prefix (decoded and normalised) is an exchange.
  http::Claim claim(http::Route& route) override;
  // Forwards the request to the next server in turn.
  void start(const http::Route& route, http::Exchange& exchange) override;
  // Closes this loop's connections to the servers.
  void close_loop(net::EventLoop* loop) override;

 private:
  const ForwardHandlerOptions options_;
  std::string prefix_;  // as given, without a final '/': "" for "/"
  std::string log_name_;
  std::string upstream_host_;  // the Host of a request that names none
  upstream::GroupPerLoop groups_;
};

}  // namespace tern::proxy
