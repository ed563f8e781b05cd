#include "server/handlers/variable_text.h"

#include <netinet/in.h>

#include <algorithm>
#include <charconv>
#include <utility>

#include "http/chars.h"
#include "http/uri.h"
#include "net/inet_address.h"
#include "server/handler.h"
#include "server/handlers/location_handlers.h"
#include "server/sites.h"

namespace tern::server {
namespace {

using Kind = VariableText::Kind;

constexpr std::pair<std::string_view, Kind> kNames[] = {
    {"server_name", Kind::kServerName}, {"server_port", Kind::kServerPort}, {"scheme", Kind::kScheme},
    {"host", Kind::kHost},              {"request_uri", Kind::kRequestUri}, {"uri", Kind::kUri},
    {"args", Kind::kArgs},              {"is_args", Kind::kIsArgs},         {"remote_addr", Kind::kRemoteAddr},
};

bool name_char(char c) { return http::chars::is_alpha(c) || (c >= '0' && c <= '9') || c == '_'; }

}  // namespace

VariableText::VariableText(std::string_view text) : text_(text) {
  auto literal = [this](std::string_view piece) {
    if (piece.empty()) return;
    if (!parts_.empty() && parts_.back().kind == Kind::kLiteral) {
      parts_.back().text.append(piece);
    } else {
      parts_.push_back({Kind::kLiteral, 0, std::string(piece)});
    }
  };
  size_t at = 0;
  while (at < text.size()) {
    const size_t dollar = text.find('$', at);
    literal(text.substr(at, dollar - at));
    if (dollar == std::string_view::npos) break;
    size_t end = dollar + 1;
    const bool braced = end < text.size() && text[end] == '{';
    if (braced) ++end;
    const size_t start = end;
    while (end < text.size() && name_char(text[end])) ++end;
    const std::string_view name = text.substr(start, end - start);
    if (braced) {
      if (end < text.size() && text[end] == '}') {
        ++end;
      } else {
        well_formed_ = false;
      }
    }
    if (name.empty()) well_formed_ = false;
    at = end;
    if (name.size() == 1 && name[0] >= '0' && name[0] <= '9') {
      parts_.push_back({Kind::kCapture, static_cast<uint8_t>(name[0] - '0'), {}});
      continue;
    }
    bool known = false;
    for (const auto& [variable, kind] : kNames) {
      if (name == variable) {
        parts_.push_back({kind, 0, {}});
        known = true;
        break;
      }
    }
    if (known) continue;
    if (name.starts_with("http_") && name.size() > 5) {
      parts_.push_back({Kind::kField, 0, std::string(name.substr(5))});
    } else if (name.starts_with("cookie_") && name.size() > 7) {
      parts_.push_back({Kind::kCookie, 0, std::string(name.substr(7))});
    } else if (name.starts_with("arg_") && name.size() > 4) {
      parts_.push_back({Kind::kArg, 0, std::string(name.substr(4))});
    } else if (!name.empty()) {
      parts_.push_back({Kind::kNamedGroup, 0, std::string(name)});
    }
  }
}

std::vector<VariableText::Variable> VariableText::variables() const {
  std::vector<Variable> out;
  for (const Part& part : parts_) {
    if (part.kind != Kind::kLiteral) out.push_back({part.kind, part.capture, part.text});
  }
  return out;
}

bool VariableText::only(std::initializer_list<Kind> kinds) const {
  bool any = false;
  for (const Part& part : parts_) {
    if (part.kind == Kind::kLiteral) continue;
    if (std::find(kinds.begin(), kinds.end(), part.kind) == kinds.end()) return false;
    any = true;
  }
  return well_formed_ && any;
}

void VariableText::expand(const Route& route, bool url, std::string* out) const {
  const http::Request& request = *route.request;
  for (const Part& part : parts_) {
    switch (part.kind) {
      case Kind::kLiteral:
        out->append(part.text);
        break;
      case Kind::kCapture:
        out->append(route.captures.get(part.capture));
        break;
      case Kind::kNamedGroup:
        // A named group of the location's regex (the config checked it).
        if (route.location != nullptr && route.location->regex) {
          const int group = route.location->regex->group_number(part.text);
          if (group > 0) out->append(route.captures.get(static_cast<size_t>(group)));
        }
        break;
      case Kind::kServerName: {
        const std::vector<std::string>& names = route.site->config().names;
        if (!names.empty() && names.front().front() != '~') out->append(names.front());
        break;
      }
      case Kind::kServerPort: {
        char digits[8];
        const auto end = std::to_chars(digits, digits + sizeof digits, route.local->port()).ptr;
        out->append(digits, static_cast<size_t>(end - digits));
        break;
      }
      case Kind::kScheme:
        out->append(route.secure != nullptr ? "https" : "http");
        break;
      case Kind::kHost: {
        char buffer[256];
        const auto host = normalize_host(request.host(), buffer);
        if (host) out->append(*host);
        break;
      }
      case Kind::kRequestUri:
        out->append(request.uri());
        break;
      case Kind::kUri:
        if (url) {
          http::append_percent_encoded_path(route.path, out);
        } else {
          out->append(route.path);
        }
        break;
      case Kind::kArgs:
        out->append(request.query());
        break;
      case Kind::kIsArgs:
        if (!request.query().empty()) out->push_back('?');
        break;
      case Kind::kRemoteAddr: {
        char ip[INET6_ADDRSTRLEN];
        out->append(ip, route.client->to_ip(ip));
        break;
      }
      case Kind::kField:
        out->append(field_value(request, part.text));
        break;
      case Kind::kCookie:
        out->append(cookie_value(request, part.text));
        break;
      case Kind::kArg:
        out->append(arg_value(request, part.text));
        break;
    }
  }
}

}  // namespace tern::server
