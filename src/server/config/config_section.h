// Section: one TOML table of the config file being read, with typed
// getters that report a bad value as a ConfigError naming the file, the line
// and the key, and finish() for the keys nobody asked for. Used by the
// config readers (config.cc, config_sites.cc) only.
#pragma once

#include <toml++/toml.h>

#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "server/config/config.h"

namespace tern::server::config_detail {

class Section {
 public:
  Section(const std::string& file, const toml::table& table, std::string prefix)
      : file_(file), table_(table), prefix_(std::move(prefix)) {}

  // Throws for the first key nobody asked for (a typo, most likely).
  void finish() const {
    for (const auto& [key, node] : table_) {
      if (!known_.contains(std::string(key.str()))) fail(node, std::string(key.str()), "unknown key");
    }
  }

  void get_bool(const char* key, bool* out) {
    if (const toml::node* node = find(key)) {
      if (!node->is_boolean()) fail(*node, key, "expected true or false");
      *out = node->as_boolean()->get();
    }
  }

  template <typename T>
  void get_int(const char* key, T* out, int64_t min, int64_t max) {
    if (const toml::node* node = find(key)) {
      if (!node->is_integer() || node->as_integer()->get() < min || node->as_integer()->get() > max) {
        fail(*node, key, "expected an integer from " + std::to_string(min) + " to " + std::to_string(max));
      }
      *out = static_cast<T>(node->as_integer()->get());
    }
  }

  void get_string(const char* key, std::string* out) {
    if (const toml::node* node = find(key)) {
      if (!node->is_string()) fail(*node, key, "expected a string");
      *out = node->as_string()->get();
    }
  }

  // "10s"-style string, or an integer of seconds.
  void get_duration(const char* key, std::chrono::milliseconds* out) {
    if (const toml::node* node = find(key)) {
      std::optional<std::chrono::milliseconds> value;
      if (node->is_string()) value = parse_duration(node->as_string()->get());
      if (node->is_integer() && node->as_integer()->get() >= 0) {
        value = std::chrono::seconds(node->as_integer()->get());
      }
      if (!value) fail(*node, key, "expected a duration such as \"500ms\", \"10s\" or \"5m\"");
      *out = *value;
    }
  }

  // "64MiB"-style string, or an integer of bytes; at least `min`.
  template <typename T>
  void get_size(const char* key, T* out, uint64_t min) {
    if (const toml::node* node = find(key)) {
      std::optional<uint64_t> value;
      if (node->is_string()) value = parse_size(node->as_string()->get());
      if (node->is_integer() && node->as_integer()->get() >= 0) {
        value = static_cast<uint64_t>(node->as_integer()->get());
      }
      if (!value || *value < min) {
        fail(*node, key, "expected a size of at least " + std::to_string(min) + " bytes, such as \"16KiB\"");
      }
      *out = static_cast<T>(*value);
    }
  }

  template <typename E>
  void get_choice(const char* key, E* out, std::initializer_list<std::pair<const char*, E>> choices) {
    if (const toml::node* node = find(key)) {
      std::string names;
      for (const auto& [name, value] : choices) {
        if (node->is_string() && node->as_string()->get() == name) {
          *out = value;
          return;
        }
        names += names.empty() ? "" : " or ";
        names += std::string("\"") + name + "\"";
      }
      fail(*node, key, "expected " + names);
    }
  }

  // An array of strings (a single string counts as a one-element array).
  std::optional<std::vector<std::pair<std::string, const toml::node*>>> get_strings(const char* key) {
    const toml::node* node = find(key);
    if (node == nullptr) return std::nullopt;
    std::vector<std::pair<std::string, const toml::node*>> out;
    if (node->is_string()) {
      out.emplace_back(node->as_string()->get(), node);
      return out;
    }
    if (!node->is_array()) fail(*node, key, "expected an array of strings");
    for (const toml::node& item : *node->as_array()) {
      if (!item.is_string()) fail(item, key, "expected an array of strings");
      out.emplace_back(item.as_string()->get(), &item);
    }
    return out;
  }

  // The raw node, for shapes the getters above do not cover.
  const toml::node* node(const char* key) { return find(key); }

  const toml::table* get_table(const char* key) {
    const toml::node* node = find(key);
    if (node == nullptr) return nullptr;
    if (!node->is_table()) fail(*node, key, "expected a table");
    return node->as_table();
  }

  [[noreturn]] void fail(const toml::node& node, const std::string& key, const std::string& what) const {
    throw ConfigError(file_, static_cast<int>(node.source().begin.line), prefix_ + key, what);
  }
  const std::string& file() const { return file_; }
  const std::string& prefix() const { return prefix_; }
  Section sub(const toml::table& table, const char* key) const {
    return Section(file_, table, prefix_ + key + ".");
  }

 private:
  const toml::node* find(const char* key) {
    known_.insert(key);
    return table_.get(key);
  }

  const std::string& file_;
  const toml::table& table_;
  std::string prefix_;
  std::set<std::string> known_;
};

// `listen` (a string or an array of them) into *out, replacing it.
void read_listen(Section& s, ListenConfig* out);
// A field name (a token) and a value without line breaks or NUL.
bool valid_field_name(std::string_view name);
bool valid_field_value(std::string_view value);

// A table of response or request fields ({ X-Frame-Options = "DENY" }),
// and a list of field names to take out; neither may name a field that
// frames the message (Content-Length, Connection, ...).
LocationConfig::Fields read_fields(Section& s, const char* key);
std::vector<std::string> read_removed_fields(Section& s, const char* key);

// A real_ip table into *out, replacing it.
void read_real_ip(Section s, const toml::table& table, RealIpConfig* out);

// A [[fastcgi]] block, at the top level (`default_match` null: "match" is
// required) or in a location (where it defaults to `default_match`).
FastCgiConfig read_fastcgi(Section s, int line, const char* default_match);

// An address marked proxy_protocol needs networks allowed to send it.
void check_proxy_protocol(const std::string& file, const Config& c);

// A group's or a limit's name: letters, digits, '_', '-' and '.'.
bool valid_group_name(std::string_view name);

// The `name` a block of [[upstream]], [[limit]] or [[cache]] begins with,
// into *out: required (`required` says what it is for), a group name, and
// none of `others` (blocks read before: name, file and line) has it. `what`
// names such a block in the message ("the cache at line 3").
template <typename Block>
void read_block_name(Section& s, int line, const std::vector<Block>& others, std::string_view what,
                     std::string_view required, std::string* out) {
  s.get_string("name", out);
  const toml::node* name = s.node("name");
  if (name == nullptr) throw ConfigError(s.file(), line, s.prefix() + "name", "required (" + std::string(required) + ")");
  if (!valid_group_name(*out)) s.fail(*name, "name", "expected letters, digits, '_', '-' or '.'");
  for (const Block& other : others) {
    if (other.name != *out) continue;
    s.fail(*name, "name", "already the name of the " + std::string(what) + " at " +
                              (other.file == s.file() ? "line " : other.file + ":") + std::to_string(other.line));
  }
}

// The [[limit]]s (the node under "limit" in the top table).
void read_key_limits(Section& top, const toml::node& node, Config& c);
// The top level's `limit_connections`.
void read_connection_limits(Section& top, Config& c);
// After the whole file: every location's limits are [[limit]]s.
void check_key_limits(const std::string& file, const Config& c);

// The [[cache]] zones (the node under "cache" in the top table), a proxy's
// or a FastCGI block's `cache` (none when absent), and after the whole file:
// every use names a zone.
void read_cache_zones(Section& top, const toml::node& node, Config& c);
std::optional<CacheUseConfig> read_cache_use(Section& s);
void check_cache_uses(const std::string& file, const Config& c);

// The [[upstream]] groups (the node under "upstream" in the top table).
void read_upstreams(Section& top, const toml::node& node, Config& c);

// A location's proxy table; `prefix_location`: the location matches a
// prefix (a path in `pass` replaces it).
ProxyConfig read_proxy(Section s, int line, bool prefix_location);
// A proxy's pass = "http[s]://GROUP_OR_ADDRESS[/path]": its group, path
// and whether over TLS; returns the node. Then its host and `tls` table.
const toml::node& read_pass(Section& s, int line, ProxyConfig& p);
void read_host_and_tls(Section& s, const toml::node& pass, ProxyConfig& p);

// The guards (config_guards.cc): a list of networks ("10.0.0.0/8"), and a
// site's or a location's auth_basic and auth_forward (its check's pass read
// as a proxy's), none when the key is absent.
std::vector<Cidr> read_cidrs(Section& s, const char* key);
std::optional<AuthBasicConfig> read_auth_basic(Section& s);
std::optional<AuthForwardConfig> read_auth_forward(Section& s);

// After the whole file: every proxy names a group or an address.
void check_proxies(const std::string& file, const Config& c);

// A [tls] or [server.tls] table, over what *t holds (the defaults, or the
// [tls] values a site inherits).
void read_tls(Section& s, int line, TlsConfig* t);
// [tls]'s session settings (tickets, cache, kernel TLS, handshake timeout).
void read_tls_sessions(Section& s, Config& c);

// [acme] (config_acme.cc), and after the whole file: each site with
// tls.acme has exact names and [acme], and its certificate's files in the
// storage.
void read_acme(Section& s, int line, Config& c);
void finish_acme_sites(const std::string& file, Config& c);

// The [[server]] blocks (the node under "server" in the top table).
void read_sites(const Section& top, const toml::node& node, Config& c);

// A config file parsed, with its ${NAME}s filled in (config_files.cc).
toml::table parse_config_file(const std::string& path);
// The files `include` names in `s`, read into `c` (config_files.cc);
// `chain`: the real paths of the files being read, the main one first.
void read_includes(Section& s, Config& c, std::vector<std::string>& chain);

// After the whole file: the implicit site when there is no [[server]], the
// inherited values (root, index) filled in, and the checks across sites.
void finish_sites(const std::string& file, Config& c);

}  // namespace tern::server::config_detail
