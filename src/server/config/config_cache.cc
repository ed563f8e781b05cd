// [[cache]] zones and a proxy's or a FastCGI block's `cache` in the config
// file.
#include <toml++/toml.h>

#include <charconv>

#include "server/config/config.h"
#include "server/config/config_section.h"
#include "server/handlers/variable_text.h"

namespace tern::server::config_detail {
namespace {

constexpr const char* kKeyExpected =
    "expected variables such as \"$scheme$host$request_uri\" ($scheme $host $request_uri $uri $args $is_args "
    "$remote_addr $server_name $server_port $http_NAME $cookie_NAME $arg_NAME)";
constexpr const char* kRequestVariableNames =
    "$scheme $host $request_uri $uri $args $is_args $remote_addr $server_name $server_port $http_NAME $cookie_NAME "
    "$arg_NAME";

// Text with the request's variables (not a regex location's captures).
bool request_variables(std::string_view text) {
  using Kind = VariableText::Kind;
  return VariableText(text).only({Kind::kServerName, Kind::kServerPort, Kind::kScheme, Kind::kHost, Kind::kRequestUri,
                                  Kind::kUri, Kind::kArgs, Kind::kIsArgs, Kind::kRemoteAddr, Kind::kField,
                                  Kind::kCookie, Kind::kArg});
}

}  // namespace

void read_cache_zones(Section& top, const toml::node& node, Config& c) {
  if (!node.is_array_of_tables()) top.fail(node, "cache", "expected [[cache]] blocks");
  size_t i = 0;
  for (const toml::node& block : *node.as_array()) {
    Section s(top.file(), *block.as_table(), "cache[" + std::to_string(i++) + "].");
    CacheZoneConfig z;
    z.line = static_cast<int>(block.source().begin.line);
    z.file = s.file();
    read_block_name(s, z.line, c.caches, "cache", "what a location's cache names", &z.name);
    s.get_string("path", &z.path);
    const toml::node* path = s.node("path");
    if (path == nullptr) throw ConfigError(s.file(), z.line, s.prefix() + "path", "required (a directory for the entries)");
    while (z.path.size() > 1 && z.path.back() == '/') z.path.pop_back();
    if (!z.path.starts_with('/')) s.fail(*path, "path", "expected an absolute directory");
    for (const CacheZoneConfig& other : c.caches) {
      if (other.path == z.path) s.fail(*path, "path", "already the directory of the cache at line " + std::to_string(other.line));
    }
    s.get_size("max_size", &z.max_size, 64 * 1024);
    s.get_size("memory", &z.memory, 64 * 1024);
    s.get_duration("inactive", &z.inactive);
    if (z.inactive < std::chrono::seconds(1)) s.fail(*s.node("inactive"), "inactive", "expected at least \"1s\"");
    s.finish();
    c.caches.push_back(std::move(z));
  }
}

// cache = "pages", or { zone = "pages", key = "...", valid = { 200 = "10m",
// any = "1m" }, store_set_cookie = false, lock = true, lock_timeout = "5s", lock_age = "5s",
// revalidate = true, background_update = true, use_stale = ["error", "timeout", "503", "updating"],
// bypass = ["$cookie_nocache"], no_store = ["$arg_nocache"],
// purge = ["127.0.0.1"] }.
std::optional<CacheUseConfig> read_cache_use(Section& s) {
  const toml::node* node = s.node("cache");
  if (node == nullptr) return std::nullopt;
  if (node->is_boolean()) {
    s.fail(*node, "cache", "a [[cache]] zone's name now (cache = true, cache_size and cache_ttl were replaced): "
                           "add [[cache]] name = \"pages\", path = \"/var/cache/tern/pages\", then cache = \"pages\", "
                           "or cache = { zone = \"pages\", valid = { 200 = \"CACHE_TTL\" } }");
  }
  CacheUseConfig u;
  u.line = static_cast<int>(node->source().begin.line);
  if (node->is_string()) {
    u.zone = node->as_string()->get();
    return u;
  }
  if (!node->is_table()) s.fail(*node, "cache", "expected a [[cache]] zone's name or { zone = \"NAME\", ... }");
  Section t = s.sub(*node->as_table(), "cache");
  t.get_string("zone", &u.zone);
  if (t.node("zone") == nullptr) throw ConfigError(s.file(), u.line, s.prefix() + "cache.zone", "required (a [[cache]]'s name)");
  t.get_string("key", &u.key);
  if (const toml::node* key = t.node("key")) {
    if (!request_variables(u.key)) {
      // One literal: GCC 12 at -O2 takes a string built here for an overflow (-Warray-bounds).
      t.fail(*key, "key", kKeyExpected);
    }
  }
  if (const toml::table* valid = t.get_table("valid")) {
    for (const auto& [status_key, value] : *valid) {
      const std::string_view text = status_key.str();
      int status = 0;
      if (text != "any") {
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), status);
        if (error != std::errc() || end != text.data() + text.size() || status < 200 || status > 599) {
          t.fail(value, "valid." + std::string(text), "expected a status from 200 to 599, or \"any\", as the key");
        }
      }
      const std::optional<std::chrono::milliseconds> lifetime =
          value.is_string() ? parse_duration(value.as_string()->get()) : std::nullopt;
      if (!lifetime) t.fail(value, "valid." + std::string(text), "expected a duration such as \"10m\" or \"1h\"");
      u.valid.emplace_back(status, std::chrono::duration_cast<std::chrono::seconds>(*lifetime));
    }
  }
  t.get_bool("store_set_cookie", &u.store_set_cookie);
  t.get_bool("lock", &u.lock);
  t.get_duration("lock_timeout", &u.lock_timeout);
  t.get_duration("lock_age", &u.lock_age);
  if (u.lock_age.count() <= 0) t.fail(*t.node("lock_age"), "lock_age", "expected a duration above 0 (\"5s\")");
  t.get_bool("revalidate", &u.revalidate);
  t.get_bool("background_update", &u.background_update);
  if (const auto networks = t.get_strings("purge")) {
    for (const auto& [text, item] : *networks) {
      std::optional<Cidr> network = Cidr::parse(text);
      if (!network) t.fail(*item, "purge", "\"" + text + "\": expected an address or a network (\"127.0.0.1\", \"10.0.0.0/8\")");
      u.purge.push_back(*network);
    }
  }
  for (auto [name, list] : {std::pair{"bypass", &u.bypass}, std::pair{"no_store", &u.no_store}}) {
    if (const auto texts = t.get_strings(name)) {
      for (const auto& [text, item] : *texts) {
        if (!request_variables(text)) {
          t.fail(*item, name, "\"" + text + "\": expected variables such as \"$cookie_nocache\" (" + kRequestVariableNames + ")");
        }
        list->push_back(text);
      }
    }
  }
  if (const auto words = t.get_strings("use_stale")) {
    for (const auto& [word, item] : *words) {
      int code = 0;
      const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), code);
      if (word == "error") {
        u.use_stale.error = true;
      } else if (word == "timeout") {
        u.use_stale.timeout = true;
      } else if (word == "updating") {
        u.use_stale.updating = true;
      } else if (error == std::errc() && end == word.data() + word.size() && code >= 400 && code <= 599) {
        u.use_stale.statuses.push_back(code);
      } else {
        t.fail(*item, "use_stale",
               "\"" + word + "\": expected error, timeout, updating or a status from 400 to 599 (\"503\")");
      }
    }
  }
  t.finish();
  return u;
}

void check_cache_uses(const std::string& file, const Config& c) {
  auto check = [&](const std::optional<CacheUseConfig>& use, const std::string& in, const std::string& where) {
    if (!use) return;
    for (const CacheZoneConfig& z : c.caches) {
      if (z.name == use->zone) return;
    }
    throw ConfigError(in, use->line, where + ".cache", "\"" + use->zone + "\" names no [[cache]]");
  };
  for (size_t i = 0; i < c.fastcgi.size(); ++i) check(c.fastcgi[i].cache, file, "fastcgi[" + std::to_string(i) + "]");
  for (const SiteConfig& site : c.sites) {
    const std::string& in = site.file.empty() ? file : site.file;
    for (size_t j = 0; j < site.locations.size(); ++j) {
      const LocationConfig& l = site.locations[j];
      const std::string where = site.where + ".location[" + std::to_string(j) + "]";
      if (l.proxy) check(l.proxy->cache, in, where + ".proxy");
      for (const FastCgiConfig& f : l.fastcgi) check(f.cache, in, where + ".fastcgi");
    }
  }
}

}  // namespace tern::server::config_detail
