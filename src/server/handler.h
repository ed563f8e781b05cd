// Handler: one step of a location's chain, with http::RequestHandler's
// interface (http/handler.h). Every request the web server gets is
// resolved once (Chain): its site, its location, its decoded and
// normalised path, a regex location's captures. That Route is handed to
// the location's handlers in order, and each either answers or passes on
// (h2o's model):
//
//   client certificate -> limits ([[limit]]) -> access (allow, deny,
//   internal) -> auth_basic -> auth_forward -> methods -> return -> users
//   app -> proxy | FastCGI blocks -> static files (index, try_files)
//
// and what no handler answers is 404. A handler decides when the head is
// complete (claim), before any body is read: to answer at once from the
// head (respond: static files, redirects, refusals; a body the request
// carries is dropped as it arrives), to take the request as an Exchange
// (start: php-fpm, the users app), to pass, or to send the request on to
// another path of the same site (try_files' last URI: an internal
// redirect). The location's response fields (headers, expires) are added
// to whatever the handler answers.
//
// Handlers are built with the Sites they belong to and are shared by the
// loops; what they keep per loop (open-file caches, upstream pools) they
// find through a LoopLocal. A Route is valid during the calls only: work
// that outlives start() copies what it needs.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "http/handler.h"
#include "server/regex.h"

namespace tern::files {
class StaticFiles;
}

namespace tern::server {

class Site;
struct Location;

// http::Route (the request, the connection's addresses, the path: here
// decoded and normalised, "/a b/c.html"; after an internal redirect, the
// path redirected to) and what the web server adds to it.
struct Route : http::Route {
  // The connection's client, where the request came from; `client` is the
  // request's, which the site's real_ip may have found behind it.
  const net::InetAddress* connection_client = nullptr;
  const Site* site = nullptr;
  const Location* location = nullptr;
  std::string target;  // what `path` views after a redirect or a try_files hit
  Captures captures;  // of a regex location
  files::StaticFiles* files = nullptr;  // this loop's files for the location's root
  // Set by the handler that claims the request: an application's exchange
  // handler (start() runs it), or the status of a refusal.
  const http::ExchangeHandler* app = nullptr;
  int status = 0;
  int redirects = 0;  // internal redirects so far
  // Its [[limit]]s: counted (not again after an internal redirect or a
  // wait), and how long it waits for its turn or, refused, until one
  // would be allowed.
  bool limited = false;
  std::chrono::milliseconds wait{0};
  std::string scratch;  // a handler's, during its call
  // A try_files' named location ("@app") the redirect goes to, the path
  // unchanged; empty: the path is matched.
  std::string_view named;
  bool internal = false;  // reached through an internal redirect
};

using Claim = http::Claim;
// A location's handler: http::RequestHandler's interface on the web
// server's Route.
using Handler = http::BasicHandler<Route>;

}  // namespace tern::server
