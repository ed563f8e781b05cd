#include "server/handlers/location_handlers.h"

#include <algorithm>

#include "auth/users_app.h"
#include "http/chars.h"
#include "http/error_page.h"
#include "http/uri.h"
#include "net/inet_address.h"
#include "net/secure_layer.h"
#include "server/chain.h"
#include "server/config/config.h"
#include "server/handlers/fastcgi_handler.h"
#include "server/sites.h"
#include "upstream/call.h"

namespace tern::server {

void StatusHandler::respond(const Route& route, http::ResponseWriter& writer) {
  http::write_error_page(writer, route.status != 0 ? route.status : status_);
}

void SlashHandler::respond(const Route& route, http::ResponseWriter& writer) {
  std::string location;
  http::append_percent_encoded_path(route.path, &location);
  location.push_back('/');
  if (!route.request->query().empty()) location.append("?").append(route.request->query());
  writer.start(301).header("Location", location);
  writer.header("Content-Type", "text/html; charset=utf-8");
  writer.body("<!DOCTYPE html>\n<html><body>Moved Permanently</body></html>\n");
}

AccessHandler::AccessHandler(const LocationConfig& config)
    : deny_all_(config.deny_all), allow_(config.allow), deny_(config.deny), access_(config.access) {}

bool AccessHandler::needed(const LocationConfig& config) {
  return config.deny_all || !config.allow.empty() || !config.deny.empty() || !config.access.empty();
}

Claim AccessHandler::claim(Route& route) {
  const net::InetAddress& client = *route.client;
  if (!access_.empty()) {
    for (const AccessRule& rule : access_) {
      if (!rule.network || rule.network->contains(client)) return rule.allow ? Claim::kPass : Claim::kRespond;
    }
    return Claim::kPass;
  }
  auto in = [&client](const std::vector<Cidr>& list) {
    return std::any_of(list.begin(), list.end(), [&client](const Cidr& c) { return c.contains(client); });
  };
  const bool refused = deny_all_ || in(deny_) || (!allow_.empty() && !in(allow_));
  return refused ? Claim::kRespond : Claim::kPass;
}

void AccessHandler::respond(const Route&, http::ResponseWriter& writer) {
  http::write_error_page(writer, 403);
}

Claim ClientCertHandler::claim(Route& route) {
  if (route.secure == nullptr) {
    if (!required_) return Claim::kPass;
    route.status = 400;
    return Claim::kRespond;
  }
  const net::PeerCertificate* peer = route.secure->peer_certificate();
  if (peer == nullptr ? required_ : peer->demands != demands_) {
    route.status = 421;
    return Claim::kRespond;
  }
  if (peer == nullptr || peer->verified() || (!peer->sent() && !required_)) return Claim::kPass;
  route.status = 400;  // one that failed, or none where one is needed
  return Claim::kRespond;
}

void ClientCertHandler::respond(const Route& route, http::ResponseWriter& writer) {
  // As nginx: a page, not a failed handshake (the request says which of
  // its certificates a browser sent, if any: $ssl_client_verify).
  http::write_error_page(writer, route.status);
}

MethodsHandler::MethodsHandler(std::vector<std::string> methods, std::string allow)
    : methods_(std::move(methods)), allow_(std::move(allow)) {
  if (std::find(methods_.begin(), methods_.end(), "GET") != methods_.end() &&
      std::find(methods_.begin(), methods_.end(), "HEAD") == methods_.end()) {
    methods_.emplace_back("HEAD");
    allow_ += ", HEAD";
  }
}

Claim MethodsHandler::claim(Route& route) {
  const std::string_view method = route.request->method_text();
  return std::find(methods_.begin(), methods_.end(), method) != methods_.end() ? Claim::kPass
                                                                              : Claim::kRespond;
}

void MethodsHandler::respond(const Route&, http::ResponseWriter& writer) {
  http::write_error_page(writer, 405, allow_);
}

ReturnHandler::ReturnHandler(const LocationConfig& config)
    : status_(config.ret.status), url_(config.ret.url), body_(config.ret.body), type_(config.ret.type) {}

namespace {

// "x_user" (of $http_x_user) names the field X-User.
bool field_name_matches(std::string_view variable, std::string_view name) {
  if (variable.size() != name.size()) return false;
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (size_t i = 0; i < name.size(); ++i) {
    const char want = variable[i] == '_' ? '-' : variable[i];
    if (lower(want) != lower(name[i])) return false;
  }
  return true;
}

}  // namespace

std::string_view field_value(const http::Request& request, std::string_view variable) {
  for (const http::Header& field : request.headers()) {
    if (field_name_matches(variable, field.name)) return field.value;
  }
  return {};
}

std::string_view arg_value(const http::Request& request, std::string_view name) {
  std::string_view query = request.query();
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    if (pair.starts_with(name) && (pair.size() == name.size() || pair[name.size()] == '=')) {
      return pair.size() == name.size() ? std::string_view() : pair.substr(name.size() + 1);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return {};
}

std::string_view cookie_value(const http::Request& request, std::string_view name) {
  for (const http::Header& field : request.headers()) {
    if (field.id != http::FieldId::kCookie) continue;
    std::string_view list = field.value;
    while (!list.empty()) {
      const size_t semicolon = list.find(';');
      std::string_view pair = http::chars::trim_ows(list.substr(0, semicolon));
      if (pair.size() > name.size() && pair.starts_with(name) && pair[name.size()] == '=') {
        return pair.substr(name.size() + 1);
      }
      if (semicolon == std::string_view::npos) break;
      list.remove_prefix(semicolon + 1);
    }
  }
  return {};
}

void ReturnHandler::respond(const Route& route, http::ResponseWriter& writer) {
  if (!url_.empty()) {
    std::string location;
    url_.expand(route, true, &location);
    writer.start(status_).header("Location", location);
    writer.header("Content-Type", "text/html; charset=utf-8");
    return writer.body("<!DOCTYPE html>\n<html><body>Moved</body></html>\n");
  }
  if (body_.empty()) return http::write_error_page(writer, status_);
  std::string body;
  body_.expand(route, false, &body);
  (void)writer.compress_for(type_, body.size());
  writer.start(status_).header("Content-Type", type_);
  writer.body(body);
}

Claim UsersHandler::claim(Route& route) {
  route.app = users_->route(*route.request);
  return route.app != nullptr ? Claim::kExchange : Claim::kPass;
}

void UsersHandler::start(const Route& route, http::Exchange& exchange) { (*route.app)(exchange); }

Claim FastCgiHandler::claim(Route& route) {
  route.app = routes_->route(block_, route.path);
  return route.app != nullptr ? Claim::kExchange : Claim::kPass;
}

InternalRedirect accel_redirect(const Chain* chain, const Site* site) {
  // The chain lives as long as the exchange: it keeps it.
  return [chain, site](std::string_view uri, const upstream::ResponseHead& head, http::Exchange& ex) {
    http::ExtraFields fields;
    for (const http::Header& field : head.headers) {
      for (std::string_view kept : {"Content-Disposition", "Set-Cookie", "Cache-Control", "Expires"}) {
        if (http::iequals(field.name, kept)) {
          fields.always.add(field.name, field.value);
        }
      }
    }
    ChainLoop* loop = chain->loops().current();
    const bool answered = loop != nullptr && &loop->chain() == chain &&
                          loop->serve_internal(*site, uri, fields, ex.request(), ex.writer());
    if (!answered) http::write_error_page(ex.writer(), 404);
    ex.finish();
  };
}

void FastCgiHandler::start(const Route& route, http::Exchange& exchange) {
  routes_->start(block_, route, exchange, accel_redirect(chain_, route.site));
}

}  // namespace tern::server
