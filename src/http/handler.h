// RequestHandler: one step of a handler chain, the one interface every
// request goes through (h2o's model). When a request head is complete the
// server hands a Route to its handlers in order, and each either passes or
// claims the request, saying how it will answer:
//
//   kRespond           respond() answers now, from the head (a body the
//                      request carries is read and dropped)
//   kRespondWithBody   respond() answers once the body is in (the Router's
//                      handlers read it with request.body())
//   kExchange          start() takes the request as an Exchange and answers
//                      when it can (an upstream, a task thread)
//   kRedirect          the route's path was changed: match again (used
//                      inside the web server's locations: try_files)
//
// What no handler claims is 404. The library's Router is a handler (first in
// HttpServer's chain); the web server adds its sites and locations as one
// more, whose locations run chains of their own handlers (static files,
// FastCGI, the users app, redirects) on a richer route (server/handler.h)
// through the same interface.
//
// Handlers are shared by the loops; a Route is valid during the calls only:
// work that outlives start() copies what it needs.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "http/exchange.h"
#include "http/request.h"
#include "http/response_writer.h"

namespace tern::net {
class EventLoop;
class InetAddress;
}

namespace tern::http {

// A handler's answer to claim(): pass, or how it will answer (see above).
enum class Claim : uint8_t { kPass, kRespond, kRespondWithBody, kExchange, kRedirect };

// What the chain knows of a request, handed from handler to handler.
struct Route {
  const Request* request = nullptr;  // the request's head
  // The connection's client (the one its PROXY protocol header named,
  // else its peer); the web server's locations have the request's
  // (Request::client_address(), after real_ip) here.
  const net::InetAddress* client = nullptr;
  const net::InetAddress* local = nullptr;  // the address it connected to
  // The connection's TLS (its protocol, cipher, server name); null for
  // plain HTTP.
  const net::SecureLayer* secure = nullptr;
  // The path handlers match on: as sent for the Router; decoded and
  // normalised in the web server's locations.
  std::string_view path;
  // Set by the handler that claims: a body limit of its own (else
  // HttpLimits::max_body_bytes; a larger Content-Length is 413 before the
  // body is read).
  std::optional<uint64_t> max_body;
  // The claiming handler's own note for its respond() or start(), so that
  // what claim() found is not looked up again (the Router's matched handler).
  const void* note = nullptr;
};

// A handler typed on the route its chain hands along (RequestHandler for
// HttpServer's chain; the web server's locations use a Route derived from
// http::Route).
template <typename RouteT>
class BasicHandler {
 public:
  virtual ~BasicHandler() = default;
  // Passes, or claims the request and says how it will answer. It may set
  // the route's max_body and note.
  virtual Claim claim(RouteT& route) = 0;
  // For kRespond and kRespondWithBody: the whole response, before returning.
  virtual void respond(const RouteT& /*route*/, ResponseWriter& /*writer*/) {}
  // For kExchange: takes the request; answers through the exchange, now or later.
  virtual void start(const RouteT& /*route*/, Exchange& /*exchange*/) {}
  // The server is going: close what this handler keeps on `loop` (its
  // connections to upstream servers), on that loop's thread while the loop
  // still runs. Once for each loop the server served on.
  virtual void close_loop(net::EventLoop* /*loop*/) {}
};

// The handlers of HttpServer's chain (add_handler).
using RequestHandler = BasicHandler<Route>;

}  // namespace tern::http
