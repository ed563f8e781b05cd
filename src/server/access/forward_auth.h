// auth_forward: a location hands the decision to an authentication service
// (Authelia, oauth2-proxy, Authentik, an application's own endpoint), as
// nginx's auth_request and Caddy's forward_auth do. After the location's
// limits, allow/deny and auth_basic, before its methods and handler:
//
//   client request -> GET pass-path to the auth service, with the client's
//                     fields and X-Forwarded-Method/-Uri/-Proto/-Host/-For,
//                     X-Original-Method/-URL, the client alone in
//                     X-Forwarded-For and Forwarded (no body)
//     2xx          -> on through the chain, the fields named in
//                     copy_headers taken from the answer (in place of any
//                     the client sent under those names)
//     401, 403, 301, 302, 303, 307, 308 -> to the client as the service
//                     sent them (a login redirect, a challenge), body
//                     included
//     else         -> 500 and a log line: another status, no connection,
//                     a bad or oversized answer, nothing within `timeout`
//
// The check goes over the proxy's groups (ProxyRoutes: a pool of kept-alive
// connections per loop and server, TLS, [[upstream]]s with several servers,
// names looked up) as an ExchangeJob that reads the answer into memory; the
// request waits as an exchange, its body held for the handler after. A
// request let through is not checked again in that location when it
// resumes (Request::granted_by); a client that leaves ends the check.
#pragma once

#include <string>

#include "server/config/config.h"
#include "server/handler.h"

namespace tern::server {

class Chain;
class ProxyRoutes;

class ForwardAuthHandler final : public Handler {
 public:
  // `routes` has the check's group; `chain` takes the requests let
  // through (it outlives them: each exchange keeps it).
  ForwardAuthHandler(const ProxyRoutes* routes, const AuthForwardConfig& config, const Chain* chain);
  Claim claim(Route& route) override;
  void start(const Route& route, http::Exchange& exchange) override;

  const AuthForwardConfig& config() const { return config_; }
  const Chain* chain() const { return chain_; }
  const ProxyRoutes* routes() const { return routes_; }
  int group() const { return group_; }
  // The Host sent to the auth service.
  const std::string& host() const { return host_; }
  // Whether its connections begin with a PROXY protocol header.
  bool proxy_protocol() const { return proxy_protocol_; }
  // copy_headers names Remote-User: it becomes the request's remote_user().
  bool copies_remote_user() const { return copies_remote_user_; }

 private:
  const ProxyRoutes* routes_;
  const Chain* chain_;
  const AuthForwardConfig config_;
  const int group_;
  std::string host_;
  bool proxy_protocol_ = false;
  bool copies_remote_user_ = false;
};

}  // namespace tern::server
