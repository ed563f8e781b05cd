// Router: maps a method and a request path to a handler; the first
// handler of HttpServer's chain (handler.h).
//
//   router.get("/hello", [](const Request&, ResponseWriter& w) {
//     w.start(200).header("Content-Type", "text/plain").body("hello\n");
//   });
//   router.prefix(Method::kGet, "/static/", serve_static);
//
// Exact routes win over prefix routes; among prefixes the longest wins. Paths
// are compared as sent (still percent-encoded). A GET route also answers
// HEAD (the writer drops the body). A path that matches with another method
// yields 405 and the Allow value; no match yields the fallback, if any, else
// the Router passes the request to the next handler of the chain (404 when
// there is none). A matched handler gets the whole request, body included.
//
// Built before the server starts, then read-only: any thread may match.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "http/handler.h"
#include "http/request.h"
#include "http/response_writer.h"

namespace tern::http {

// A route's handler: answers the request, whole, before it returns.
using Handler = std::function<void(const Request& request, ResponseWriter& writer)>;

class Router final : public RequestHandler {
 public:
  // `method` on exactly `path`.
  void route(Method method, std::string path, Handler handler) {
    add(method, std::move(path), false, std::move(handler));
  }
  // `method` on every path that begins with `path_prefix`.
  void prefix(Method method, std::string path_prefix, Handler handler) {
    add(method, std::move(path_prefix), true, std::move(handler));
  }
  // route() for GET (which answers HEAD too) and for POST.
  void get(std::string path, Handler handler) { route(Method::kGet, std::move(path), std::move(handler)); }
  void post(std::string path, Handler handler) { route(Method::kPost, std::move(path), std::move(handler)); }
  // Called when nothing matches (a static-file handler, typically).
  void set_fallback(Handler handler) { fallback_ = std::move(handler); }

  // What a method and path find.
  struct Match {
    const Handler* handler = nullptr;  // null: answer `status`
    int status = 404;                  // 404 or 405
    std::string_view allow;            // for 405: "GET, HEAD, POST"
  };
  Match match(Method method, std::string_view path) const;  // any thread

  // RequestHandler: a request that match() finds a handler for is answered
  // with its body read whole, one whose path has routes for other methods
  // only is a 405, any other passes.
  Claim claim(Route& route) override;
  // Runs the handler claim() found, or writes the 405.
  void respond(const Route& route, ResponseWriter& writer) override;

 private:
  struct Entry {
    std::string path;
    std::vector<std::pair<Method, Handler>> handlers;
    std::string allow;  // kept in sync with handlers
  };
  void add(Method method, std::string path, bool is_prefix, Handler handler);
  Match match_route(const Entry& route, Method method) const;

  std::vector<Entry> exact_;
  std::vector<Entry> prefixes_;  // longest first
  Handler fallback_;
};

}  // namespace tern::http
