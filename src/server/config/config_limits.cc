// [[limit]]: the request rates locations take (server/limits/).
#include <algorithm>
#include <cctype>
#include <charconv>

#include "server/config/config_section.h"

namespace tern::server::config_detail {
namespace {

// "10r/s" or "30r/m": requests a second, in thousandths.
std::optional<uint64_t> parse_rate(std::string_view text) {
  uint64_t count = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), count);
  if (error != std::errc() || end == text.data() || count == 0 || count > 1'000'000) return std::nullopt;
  const std::string_view unit(end, static_cast<size_t>(text.data() + text.size() - end));
  if (unit == "r/s") return count * 1000;
  if (unit == "r/m") return std::max<uint64_t>(count * 1000 / 60, 1);
  return std::nullopt;
}

// Text and variables: $remote_addr, $server_name, $host, $request_uri,
// $uri, $scheme, $http_NAME, $cookie_NAME (a name of letters, digits and
// '_'), at least one variable.
bool valid_limit_key(std::string_view key) {
  bool variable = false;
  for (size_t at = key.find('$'); at != std::string_view::npos; at = key.find('$', at)) {
    size_t end = at + 1;
    while (end < key.size() && (std::isalnum(static_cast<unsigned char>(key[end])) || key[end] == '_')) ++end;
    const std::string_view name = key.substr(at + 1, end - at - 1);
    const bool known = name == "remote_addr" || name == "server_name" || name == "host" || name == "request_uri" ||
                       name == "uri" || name == "scheme" ||
                       (name.starts_with("http_") && name.size() > 5) || (name.starts_with("cookie_") && name.size() > 7);
    if (!known) return false;
    variable = true;
    at = end;
  }
  return variable;
}

}  // namespace

void read_key_limits(Section& top, const toml::node& node, Config& c) {
  if (!node.is_array_of_tables()) top.fail(node, "limit", "expected [[limit]] blocks");
  size_t i = 0;
  for (const toml::node& block : *node.as_array()) {
    Section s(top.file(), *block.as_table(), "limit[" + std::to_string(i++) + "].");
    KeyLimitConfig l;
    l.line = static_cast<int>(block.source().begin.line);
    l.file = s.file();
    s.get_string("name", &l.name);
    const toml::node* name = s.node("name");
    if (name == nullptr) throw ConfigError(s.file(), l.line, s.prefix() + "name", "required");
    if (!valid_group_name(l.name)) s.fail(*name, "name", "expected letters, digits, '_', '-' or '.'");
    for (const KeyLimitConfig& other : c.key_limits) {
      if (other.name == l.name) s.fail(*name, "name", "already the name of the limit at line " + std::to_string(other.line));
    }
    s.get_string("key", &l.key);
    if (const toml::node* key = s.node("key"); key != nullptr && !valid_limit_key(l.key)) {
      s.fail(*key, "key", "expected variables such as \"$remote_addr\", \"$http_NAME\", \"$cookie_NAME\", "
                          "\"$server_name\" or \"$host\", with text between");
    }
    const toml::node* rate = s.node("rate");
    if (rate == nullptr) throw ConfigError(s.file(), l.line, s.prefix() + "rate", "required (\"10r/s\" or \"30r/m\")");
    std::optional<uint64_t> parsed = rate->is_string() ? parse_rate(rate->as_string()->get()) : std::nullopt;
    if (!parsed) s.fail(*rate, "rate", "expected requests a second or a minute, such as \"10r/s\" or \"30r/m\"");
    l.rate_milli = *parsed;
    s.get_int("burst", &l.burst, 0, 1'000'000);
    s.get_int("delay", &l.delay, 0, 1'000'000);
    bool nodelay = false;
    s.get_bool("nodelay", &nodelay);
    if (nodelay && s.node("delay") != nullptr) s.fail(*s.node("nodelay"), "nodelay", "either delay or nodelay, not both");
    if (nodelay) l.delay = l.burst;
    if (l.delay > l.burst) s.fail(*s.node("delay"), "delay", "at most burst (" + std::to_string(l.burst) + ")");
    s.get_int("status", &l.status, 400, 599);
    s.get_int("size", &l.size, 1, 100'000'000);
    s.finish();
    c.key_limits.push_back(std::move(l));
  }
}

void check_key_limits(const std::string& file, const Config& c) {
  for (const SiteConfig& site : c.sites) {
    const std::string& in = site.file.empty() ? file : site.file;
    for (size_t j = 0; j < site.locations.size(); ++j) {
      const LocationConfig& l = site.locations[j];
      for (const std::string& name : l.limit) {
        const bool known = std::any_of(c.key_limits.begin(), c.key_limits.end(),
                                       [&name](const KeyLimitConfig& k) { return k.name == name; });
        if (!known) {
          throw ConfigError(in, l.line, site.where + ".location[" + std::to_string(j) + "].limit",
                            "\"" + name + "\" names no [[limit]]");
        }
      }
    }
  }
}

}  // namespace tern::server::config_detail
