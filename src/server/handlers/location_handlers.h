// The handlers a location's settings make, beside the static files
// (static_handler.h): refusals (allow/deny, methods, internal), `return`,
// and the adapters that put the applications (the users app, FastCGI
// blocks) on the chain. See server/handler.h for the order.
#pragma once

#include <string>
#include <vector>

#include "http/exchange.h"
#include "server/handler.h"
#include "server/handlers/variable_text.h"
#include "server/ip_filter.h"
#include "upstream/call.h"

namespace tern::auth {
class UsersApp;
}

namespace tern::server {

class Chain;
class FastCgiRoutes;
struct LocationConfig;

// Answers an error page with a status the chain chose (400, 403, 404).
class StatusHandler final : public Handler {
 public:
  explicit StatusHandler(int status) : status_(status) {}
  Claim claim(Route&) override { return Claim::kRespond; }
  void respond(const Route& route, http::ResponseWriter& writer) override;

 private:
  int status_;
};

// 301 to the request's path with a slash added, its query kept: for "/app"
// where a proxy or FastCGI location is "/app/" (Site::wants_slash).
class SlashHandler final : public Handler {
 public:
  Claim claim(Route&) override { return Claim::kRespond; }
  void respond(const Route& route, http::ResponseWriter& writer) override;
};

// allow / deny: 403 for a client the location does not admit.
class AccessHandler final : public Handler {
 public:
  explicit AccessHandler(const LocationConfig& config);
  static bool needed(const LocationConfig& config);
  Claim claim(Route& route) override;
  void respond(const Route& route, http::ResponseWriter& writer) override;

 private:
  bool deny_all_;
  std::vector<Cidr> allow_;
  std::vector<Cidr> deny_;
  std::vector<AccessRule> access_;  // in order, first match decides
};

// The client certificates of a site that asks for them (verify_client), on
// each of its locations, as nginx checks them: a certificate that did not
// verify (expired, revoked, from another CA) is 400 wherever it comes; so
// is none where the location needs one (require_client_cert, or the site's
// "on"), plain HTTP included. A request on a TLS connection made for a site
// that asks other things of its clients (another CA, none: a browser
// reusing an HTTP/2 connection, a name chosen to dodge the question) is
// 421: the client connects again for this name.
class ClientCertHandler final : public Handler {
 public:
  // `demands`: the site's tls::client_demands().
  ClientCertHandler(bool required, std::string demands) : required_(required), demands_(std::move(demands)) {}
  Claim claim(Route& route) override;
  void respond(const Route& route, http::ResponseWriter& writer) override;

 private:
  bool required_;
  std::string demands_;
};

// methods: 405 with Allow for a method the location does not list (GET
// admits HEAD).
class MethodsHandler final : public Handler {
 public:
  MethodsHandler(std::vector<std::string> methods, std::string allow);
  Claim claim(Route& route) override;
  void respond(const Route& route, http::ResponseWriter& writer) override;

 private:
  std::vector<std::string> methods_;
  std::string allow_;
};

// return: a redirect, a body, or an error page, with variables expanded.
class ReturnHandler final : public Handler {
 public:
  explicit ReturnHandler(const LocationConfig& config);
  Claim claim(Route&) override { return Claim::kRespond; }
  void respond(const Route& route, http::ResponseWriter& writer) override;

 private:
  int status_;
  VariableText url_;
  VariableText body_;
  std::string type_;
};

// The value of the request's field `variable` names ("x_user": X-User;
// the first of that name), or "".
std::string_view field_value(const http::Request& request, std::string_view variable);
// The value of the request's cookie `name`, or "".
std::string_view cookie_value(const http::Request& request, std::string_view name);
// The value of the query's first parameter `name` as sent (not decoded;
// "" for "name" alone), or "".
std::string_view arg_value(const http::Request& request, std::string_view name);

// The users app on the chain: its paths (/api/...) as exchanges.
class UsersHandler final : public Handler {
 public:
  explicit UsersHandler(const auth::UsersApp* users) : users_(users) {}
  Claim claim(Route& route) override;
  void start(const Route& route, http::Exchange& exchange) override;

 private:
  const auth::UsersApp* users_;
};

// One FastCGI block on the chain.
// What answers an application's X-Accel-Redirect (a FastCGI block's or a
// proxied server's): the file the URI names in `site`, as a GET, with the
// application's download fields (Content-Disposition, Set-Cookie,
// Cache-Control, Expires); 404 when no static location has it.
using InternalRedirect = decltype(upstream::CallOptions::internal_redirect);
InternalRedirect accel_redirect(const Chain* chain, const Site* site);

class FastCgiHandler final : public Handler {
 public:
  // `chain` answers the block's X-Accel-Redirects.
  FastCgiHandler(FastCgiRoutes* routes, size_t block, const Chain* chain)
      : routes_(routes), block_(block), chain_(chain) {}
  Claim claim(Route& route) override;
  void start(const Route& route, http::Exchange& exchange) override;

 private:
  FastCgiRoutes* routes_;
  size_t block_;
  const Chain* chain_;
};

}  // namespace tern::server
