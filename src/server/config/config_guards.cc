// What guards a site or a location before its handler: the networks of
// allow and deny, auth_basic, auth_forward.
#include <toml++/toml.h>

#include "server/config/config.h"
#include "server/config/config_section.h"

namespace tern::server::config_detail {

std::vector<Cidr> read_cidrs(Section& s, const char* key) {
  std::vector<Cidr> out;
  if (auto list = s.get_strings(key)) {
    for (const auto& [text, node] : *list) {
      auto cidr = Cidr::parse(text);
      if (!cidr) s.fail(*node, key, "\"" + text + "\" is not an address or network (\"10.0.0.0/8\")");
      out.push_back(*cidr);
    }
  }
  return out;
}

namespace {

// A guard's value: its table, or "off" (nullptr) in a location under a site
// that has the guard.
const toml::table* table_or_off(Section& s, const toml::node& node, const char* key, std::string_view table) {
  if (node.is_string() && node.as_string()->get() == "off") return nullptr;
  if (!node.is_table()) s.fail(node, key, "expected " + std::string(table) + " or \"off\"");
  return node.as_table();
}

}  // namespace

// auth_basic = { realm = "Admin", users = "/etc/tern/htpasswd", attempts = 10 },
// or "off" (a location under a site that has one).
std::optional<AuthBasicConfig> read_auth_basic(Section& s) {
  const toml::node* node = s.node("auth_basic");
  if (node == nullptr) return std::nullopt;
  AuthBasicConfig a;
  a.line = static_cast<int>(node->source().begin.line);
  const toml::table* table = table_or_off(s, *node, "auth_basic", "{ realm = \"...\", users = \"HTPASSWD FILE\" }");
  if (table == nullptr) return a;
  Section t = s.sub(*table, "auth_basic");
  t.get_string("realm", &a.realm);
  t.get_string("users", &a.users);
  t.get_int("attempts", &a.attempts, 1, 1'000'000);
  if (a.realm.empty()) throw ConfigError(s.file(), a.line, s.prefix() + "auth_basic.realm", "required (what browsers show)");
  for (char ch : a.realm) {
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) t.fail(*t.node("realm"), "realm", "no control characters");
  }
  if (a.users.empty()) throw ConfigError(s.file(), a.line, s.prefix() + "auth_basic.users", "required (an htpasswd file)");
  t.finish();
  return a;
}

// auth_forward = { pass = "http://127.0.0.1:9091/api/verify", copy_headers
// = ["Remote-User"], timeout = "5s", host = "...", tls = { ... } }, or
// "off" (a location under a site that has one).
std::optional<AuthForwardConfig> read_auth_forward(Section& s) {
  const toml::node* node = s.node("auth_forward");
  if (node == nullptr) return std::nullopt;
  AuthForwardConfig a;
  a.line = static_cast<int>(node->source().begin.line);
  const toml::table* table = table_or_off(s, *node, "auth_forward", "{ pass = \"http://127.0.0.1:9091/api/verify\" }");
  if (table == nullptr) return a;
  Section t = s.sub(*table, "auth_forward");
  ProxyConfig& check = a.check.emplace();
  check.line = a.line;
  const toml::node& pass = read_pass(t, a.line, check);
  a.copy_headers = read_removed_fields(t, "copy_headers");
  t.get_duration("timeout", &a.timeout);
  if (a.timeout.count() <= 0) t.fail(*t.node("timeout"), "timeout", "expected a duration above 0 (\"5s\")");
  check.read_timeout = check.send_timeout = a.timeout;
  read_host_and_tls(t, pass, check);
  t.finish();
  return a;
}

}  // namespace tern::server::config_detail
