#include "http/router.h"

#include <algorithm>

#include "http/error_page.h"

namespace tern::http {

void Router::add(Method method, std::string path, bool is_prefix, Handler handler) {
  auto& routes = is_prefix ? prefixes_ : exact_;
  auto it = std::find_if(routes.begin(), routes.end(), [&](const Entry& r) { return r.path == path; });
  if (it == routes.end()) {
    routes.push_back(Entry{path, {}, {}});
    if (is_prefix) {
      std::stable_sort(routes.begin(), routes.end(),
                       [](const Entry& a, const Entry& b) { return a.path.size() > b.path.size(); });
    }
    it = std::find_if(routes.begin(), routes.end(), [&](const Entry& r) { return r.path == path; });
  }
  it->handlers.emplace_back(method, std::move(handler));
  if (!it->allow.empty()) it->allow += ", ";
  it->allow += method_name(method);
  if (method == Method::kGet) it->allow += ", HEAD";
}

Router::Match Router::match_route(const Entry& route, Method method) const {
  for (const auto& [m, handler] : route.handlers) {
    if (m == method || (method == Method::kHead && m == Method::kGet)) return {&handler, 200, {}};
  }
  return {nullptr, 405, route.allow};
}

Router::Match Router::match(Method method, std::string_view path) const {
  for (const Entry& r : exact_) {
    if (r.path == path) return match_route(r, method);
  }
  for (const Entry& r : prefixes_) {
    if (path.starts_with(r.path)) return match_route(r, method);
  }
  if (fallback_) return {&fallback_, 200, {}};
  return {nullptr, 404, {}};
}

Claim Router::claim(Route& route) {
  // A server whose requests all go to handlers after the Router (tern's
  // own) pays nothing for it.
  if (exact_.empty() && prefixes_.empty() && !fallback_) return Claim::kPass;
  const Match found = match(route.request->method(), route.path);
  if (found.handler == nullptr && found.status != 405) return Claim::kPass;
  route.note = found.handler;  // null for a 405
  return found.handler != nullptr ? Claim::kRespondWithBody : Claim::kRespond;
}

void Router::respond(const Route& route, ResponseWriter& writer) {
  if (route.note != nullptr) return (*static_cast<const Handler*>(route.note))(*route.request, writer);
  // A 405 (rare): its Allow value is looked up again.
  const Match found = match(route.request->method(), route.path);
  write_error_page(writer, found.status, found.allow);
}

}  // namespace tern::http
