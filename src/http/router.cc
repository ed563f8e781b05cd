#include "http/router.h"

#include <algorithm>

namespace tern::http {

void Router::add(Method method, std::string path, bool is_prefix, Handler handler) {
  auto& routes = is_prefix ? prefixes_ : exact_;
  auto it = std::find_if(routes.begin(), routes.end(), [&](const Route& r) { return r.path == path; });
  if (it == routes.end()) {
    routes.push_back(Route{path, {}, {}});
    if (is_prefix) {
      std::stable_sort(routes.begin(), routes.end(),
                       [](const Route& a, const Route& b) { return a.path.size() > b.path.size(); });
    }
    it = std::find_if(routes.begin(), routes.end(), [&](const Route& r) { return r.path == path; });
  }
  it->handlers.emplace_back(method, std::move(handler));
  if (!it->allow.empty()) it->allow += ", ";
  it->allow += method_name(method);
  if (method == Method::kGet) it->allow += ", HEAD";
}

Router::Match Router::match_route(const Route& route, Method method) const {
  for (const auto& [m, handler] : route.handlers) {
    if (m == method || (method == Method::kHead && m == Method::kGet)) return {&handler, 200, {}};
  }
  return {nullptr, 405, route.allow};
}

Router::Match Router::match(Method method, std::string_view path) const {
  for (const Route& r : exact_) {
    if (r.path == path) return match_route(r, method);
  }
  for (const Route& r : prefixes_) {
    if (path.starts_with(r.path)) return match_route(r, method);
  }
  if (fallback_) return {&fallback_, 200, {}};
  return {nullptr, 404, {}};
}

}  // namespace tern::http
