// Header fields in the config: the tables of fields a location or site
// adds (headers, headers_always, a proxy's set_headers) and the lists it
// takes out (headers_remove, remove_headers).
#include <algorithm>
#include <string>
#include <vector>

#include "http/chars.h"
#include "http/request.h"
#include "server/config/config_section.h"

namespace tern::server::config_detail {

bool valid_field_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) { return http::chars::is_tchar(ch); });
}

bool valid_field_value(std::string_view value) {
  return std::none_of(value.begin(), value.end(),
                      [](char ch) { return ch == '\r' || ch == '\n' || ch == '\0'; });
}

// Fields a response may not lose or be given from the config: they frame
// the message or belong to the connection.
bool framing_field(std::string_view name) {
  for (std::string_view fixed : {"Content-Length", "Transfer-Encoding", "Connection", "Date", "Upgrade", "Keep-Alive"}) {
    if (http::iequals(name, fixed)) return true;
  }
  return false;
}

std::vector<std::string> read_removed_fields(Section& s, const char* key) {
  std::vector<std::string> out;
  if (auto names = s.get_strings(key)) {
    for (const auto& [name, node] : *names) {
      if (!valid_field_name(name)) s.fail(*node, key, "\"" + name + "\" is not a header name");
      if (framing_field(name)) s.fail(*node, key, name + " belongs to the message's framing and stays");
      out.push_back(name);
    }
  }
  return out;
}

LocationConfig::Fields read_fields(Section& s, const char* key) {
  LocationConfig::Fields out;
  const toml::table* table = s.get_table(key);
  if (table == nullptr) return out;
  for (const auto& [name, node] : *table) {
    const std::string field(name.str());
    if (!valid_field_name(field)) s.fail(node, std::string(key) + "." + field, "not a header name");
    if (!node.is_string() || !valid_field_value(node.as_string()->get())) {
      s.fail(node, std::string(key) + "." + field, "expected a string without line breaks");
    }
    if (framing_field(field)) s.fail(node, std::string(key) + "." + field, "belongs to the message's framing");
    out.emplace_back(field, node.as_string()->get());
  }
  return out;
}

}  // namespace tern::server::config_detail
