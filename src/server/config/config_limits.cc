// [[limit]]: the request rates locations take and the connections per
// address the top level takes (server/limits/).
#include <algorithm>
#include <cctype>
#include <charconv>

#include "server/config/config_section.h"
#include "server/handlers/variable_text.h"

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
// $uri, $scheme, $http_NAME, $cookie_NAME, $arg_NAME (a name of letters, digits and
// '_'), at least one variable.
bool valid_limit_key(std::string_view key) {
  using Kind = VariableText::Kind;
  return VariableText(key).only({Kind::kRemoteAddr, Kind::kServerName, Kind::kHost, Kind::kRequestUri, Kind::kUri,
                                 Kind::kScheme, Kind::kField, Kind::kCookie, Kind::kArg});
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
    read_block_name(s, l.line, c.key_limits, "limit", "what a location's limit names", &l.name);
    s.get_string("key", &l.key);
    if (const toml::node* key = s.node("key"); key != nullptr && !valid_limit_key(l.key)) {
      s.fail(*key, "key", "expected variables such as \"$remote_addr\", \"$http_NAME\", \"$cookie_NAME\", \"$arg_NAME\", "
                          "\"$server_name\" or \"$host\", with text between");
    }
    const toml::node* rate = s.node("rate");
    const toml::node* connections = s.node("connections");
    if (rate != nullptr && connections != nullptr) s.fail(*connections, "connections", "either rate or connections, not both");
    if (rate == nullptr && connections == nullptr) {
      throw ConfigError(s.file(), l.line, s.prefix() + "rate",
                        "required (\"10r/s\" or \"30r/m\"), or connections = N");
    }
    if (connections != nullptr) {
      s.get_int("connections", &l.connections, 1, 1'000'000);
      for (const char* key : {"burst", "delay", "nodelay"}) {
        if (const toml::node* n = s.node(key)) s.fail(*n, key, "a limit of connections has no burst or delay");
      }
      l.status = 503;  // nginx's limit_conn_status
    } else {
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
    }
    s.get_int("status", &l.status, 400, 599);
    s.get_int("size", &l.size, 1, 100'000'000);
    s.finish();
    c.key_limits.push_back(std::move(l));
  }
}

void read_connection_limits(Section& top, Config& c) {
  auto names = top.get_strings("limit_connections");
  if (!names) return;
  c.limit_connections.clear();
  for (const auto& [name, node] : *names) {
    if (std::find(c.limit_connections.begin(), c.limit_connections.end(), name) != c.limit_connections.end()) {
      top.fail(*node, "limit_connections", "\"" + name + "\" named twice");
    }
    c.limit_connections.push_back(name);
    c.limit_connections_line = static_cast<int>(node->source().begin.line);
  }
}

void check_key_limits(const std::string& file, const Config& c) {
  auto find = [&c](const std::string& name) -> const KeyLimitConfig* {
    for (const KeyLimitConfig& k : c.key_limits) {
      if (k.name == name) return &k;
    }
    return nullptr;
  };
  for (const std::string& name : c.limit_connections) {
    const KeyLimitConfig* k = find(name);
    if (k == nullptr) throw ConfigError(file, c.limit_connections_line, "limit_connections", "\"" + name + "\" names no [[limit]]");
    if (k->connections == 0) {
      throw ConfigError(file, c.limit_connections_line, "limit_connections",
                        "\"" + name + "\" is a limit of requests (rate): a location names it");
    }
    if (k->key != "$remote_addr") {
      throw ConfigError(file, c.limit_connections_line, "limit_connections",
                        "\"" + name + "\" counts by " + k->key + ": a connection is counted by \"$remote_addr\" "
                        "(nothing else is known at accept); a location may name it (requests in flight)");
    }
    if (k->status != 503) {
      throw ConfigError(file, c.limit_connections_line, "limit_connections",
                        "\"" + name + "\" has a status: a connection over the limit is closed, not answered");
    }
  }
  for (const SiteConfig& site : c.sites) {
    const std::string& in = site.file.empty() ? file : site.file;
    for (size_t j = 0; j < site.locations.size(); ++j) {
      const LocationConfig& l = site.locations[j];
      for (const std::string& name : l.limit) {
        const KeyLimitConfig* k = find(name);
        const std::string key = site.where + ".location[" + std::to_string(j) + "].limit";
        if (k == nullptr) throw ConfigError(in, l.line, key, "\"" + name + "\" names no [[limit]]");
        if (k->connections != 0 &&
            std::find(c.limit_connections.begin(), c.limit_connections.end(), name) != c.limit_connections.end()) {
          throw ConfigError(in, l.line, key,
                            "\"" + name + "\" counts connections (limit_connections): requests in flight need a "
                            "[[limit]] of their own");
        }
      }
    }
  }
}

}  // namespace tern::server::config_detail
