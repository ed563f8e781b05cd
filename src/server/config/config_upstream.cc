// The [[upstream]] groups and a location's `proxy` in the config file.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "http/request.h"
#include "proxy/forward_head.h"
#include "server/config/config_section.h"

namespace tern::server::config_detail {

bool valid_group_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
           ch == '-' || ch == '.';
  });
}

}  // namespace tern::server::config_detail

namespace tern::server {

bool parse_host_port(std::string_view text, std::string* host, uint16_t* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  const std::string_view name = text.substr(0, colon);
  const std::string_view digits = text.substr(colon + 1);
  unsigned value = 0;
  if (digits.empty() || digits.size() > 5) return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value == 0 || value > 65535) return false;
  // Letters, digits, '-' and '.', as DNS names are (and '_' as some are).
  if (name.size() > 253 || name.front() == '.' || name.front() == '-' || !config_detail::valid_group_name(name)) {
    return false;
  }
  // All digits and dots would be an address, and not a valid one.
  if (std::all_of(name.begin(), name.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; })) return false;
  *host = std::string(name);
  *port = static_cast<uint16_t>(value);
  return true;
}

}  // namespace tern::server

namespace tern::server::config_detail {
namespace {

UpstreamServerConfig read_upstream_server(Section s, const toml::node& where) {
  UpstreamServerConfig server;
  s.get_string("address", &server.address_text);
  const toml::node* address = s.node("address");
  if (address == nullptr) s.fail(where, "address", "required (\"127.0.0.1:3000\" or \"unix:/run/app.sock\")");
  if (auto parsed = net::SocketAddress::parse(server.address_text)) {
    server.address = *parsed;
  } else if (!parse_host_port(server.address_text, &server.host, &server.port)) {
    s.fail(*address, "address", "expected \"127.0.0.1:3000\", \"[::1]:3000\", \"unix:/run/app.sock\" or a name: \"app:3000\"");
  }
  s.get_int("weight", &server.weight, 1, 1000);
  s.get_bool("backup", &server.backup);
  s.get_int("max_fails", &server.max_fails, 0, 1000);
  s.get_duration("fail_timeout", &server.fail_timeout);
  s.finish();
  return server;
}

// "$remote_addr", "$request_uri", "$http_NAME", "$cookie_NAME".
bool valid_hash_key(std::string_view key) {
  if (key == "$remote_addr" || key == "$request_uri") return true;
  for (std::string_view prefix : {"$http_", "$cookie_"}) {
    if (key.starts_with(prefix) && valid_group_name(key.substr(prefix.size()))) return true;
  }
  return false;
}

// "200", "2xx" or "200-399".
bool parse_status_range(std::string_view text, int* min, int* max) {
  auto number = [](std::string_view digits, int* out) {
    if (digits.size() != 3) return false;
    *out = 0;
    for (char ch : digits) {
      if (ch < '0' || ch > '9') return false;
      *out = *out * 10 + (ch - '0');
    }
    return *out >= 100 && *out <= 599;
  };
  if (text.size() == 3 && text.ends_with("xx") && text[0] >= '1' && text[0] <= '5') {
    *min = (text[0] - '0') * 100;
    *max = *min + 99;
    return true;
  }
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos) return number(text, min) && number(text, max);
  return number(text.substr(0, dash), min) && number(text.substr(dash + 1), max) && *min <= *max;
}

upstream::HealthOptions read_health(Section s) {
  upstream::HealthOptions h;
  s.get_string("path", &h.path);
  if (const toml::node* path = s.node("path");
      path != nullptr && (!h.path.starts_with('/') || h.path.find_first_of(" \r\n") != std::string::npos)) {
    s.fail(*path, "path", "expected a path such as \"/health\"");
  }
  s.get_string("host", &h.host);
  if (const toml::node* host = s.node("host"); host != nullptr && h.host.find_first_of(" \r\n") != std::string::npos) {
    s.fail(*host, "host", "expected a host name");
  }
  s.get_duration("interval", &h.interval);
  s.get_duration("timeout", &h.timeout);
  if (const toml::node* interval = s.node("interval"); interval != nullptr && h.interval.count() < 100) {
    s.fail(*interval, "interval", "expected at least 100ms");
  }
  std::string status;
  s.get_string("status", &status);
  if (const toml::node* node = s.node("status"); node != nullptr && !parse_status_range(status, &h.status_min, &h.status_max)) {
    s.fail(*node, "status", "expected \"200\", \"2xx\" or \"200-399\"");
  }
  s.get_int("rise", &h.rise, 1, 100);
  s.get_int("fall", &h.fall, 1, 100);
  s.finish();
  return h;
}

UpstreamTlsConfig read_upstream_tls(Section s) {
  UpstreamTlsConfig t;
  s.get_string("name", &t.name);
  if (const toml::node* name = s.node("name")) {
    const bool valid = !t.name.empty() && t.name.size() <= 253 &&
                       t.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:") ==
                           std::string::npos;
    if (!valid) s.fail(*name, "name", "expected a host name or an IP address");
  }
  s.get_bool("verify", &t.verify);
  auto readable = [&s](const char* key, std::string* path) {
    s.get_string(key, path);
    const toml::node* node = s.node(key);
    if (node != nullptr && ::access(path->c_str(), R_OK) != 0) {
      s.fail(*node, key, *path + ": " + std::strerror(errno));
    }
  };
  readable("ca", &t.ca);
  readable("cert", &t.cert);
  readable("key", &t.key);
  if (t.cert.empty() != t.key.empty()) {
    s.fail(*s.node(t.cert.empty() ? "key" : "cert"), t.cert.empty() ? "cert" : "key",
           "a client certificate needs both cert and key");
  }
  s.finish();
  return t;
}

}  // namespace

void read_upstreams(Section& top, const toml::node& node, Config& c) {
  if (!node.is_array_of_tables()) top.fail(node, "upstream", "expected [[upstream]] blocks");
  size_t i = 0;
  for (const toml::node& block : *node.as_array()) {
    const std::string prefix = "upstream[" + std::to_string(i++) + "].";
    Section s(top.file(), *block.as_table(), prefix);
    UpstreamConfig u;
    u.line = static_cast<int>(block.source().begin.line);
    u.file = s.file();
    read_block_name(s, u.line, c.upstreams, "group", "the name a proxy's pass uses: \"http://NAME\"", &u.name);
    s.get_choice("method", &u.method,
                 {{"round_robin", UpstreamConfig::Method::kRoundRobin},
                  {"least_conn", UpstreamConfig::Method::kLeastConnections},
                  {"hash", UpstreamConfig::Method::kHash}});
    s.get_string("hash", &u.hash);
    if (const toml::node* hash = s.node("hash"); hash != nullptr && !valid_hash_key(u.hash)) {
      s.fail(*hash, "hash", "expected \"$remote_addr\", \"$request_uri\", \"$http_NAME\" or \"$cookie_NAME\"");
    }
    s.get_int("keepalive", &u.keepalive, 0, 100000);
    s.get_int("connections", &u.connections, 0, 1'000'000);
    s.get_int("queue", &u.queue, 0, 1'000'000);
    s.get_duration("connect_timeout", &u.connect_timeout);
    s.get_duration("queue_timeout", &u.queue_timeout);
    s.get_choice("proxy_protocol", &u.proxy_protocol, {{"v1", 1}, {"v2", 2}});
    if (const toml::node* health = s.node("health")) {
      if (!health->is_table()) s.fail(*health, "health", "expected a table { path = \"/health\", interval = \"5s\" }");
      u.health = read_health(s.sub(*health->as_table(), "health"));
    }
    const toml::node* servers = s.node("servers");
    if (servers == nullptr) s.fail(block, "servers", "required: servers = [{ address = \"127.0.0.1:3000\" }]");
    if (!servers->is_array() || servers->as_array()->empty()) {
      s.fail(*servers, "servers", "expected a non-empty array of tables { address = \"127.0.0.1:3000\" }");
    }
    size_t j = 0;
    for (const toml::node& server : *servers->as_array()) {
      const std::string key = "servers[" + std::to_string(j++) + "]";
      if (!server.is_table()) s.fail(server, key, "expected a table { address = \"127.0.0.1:3000\" }");
      u.servers.push_back(read_upstream_server(s.sub(*server.as_table(), key.c_str()), server));
    }
    if (u.servers.size() > 64) s.fail(*servers, "servers", "at most 64 servers in a group");
    s.finish();
    c.upstreams.push_back(std::move(u));
  }
}

// pass = "http[s]://GROUP_OR_ADDRESS[/path]": the group, the path, whether
// over TLS. Returns its node.
const toml::node& read_pass(Section& s, int line, ProxyConfig& p) {
  s.get_string("pass", &p.pass);
  const toml::node* pass = s.node("pass");
  if (pass == nullptr) {
    throw ConfigError(s.file(), line, s.prefix() + "pass", "required (\"http://GROUP\" or \"http://127.0.0.1:3000\")");
  }
  std::string_view rest = p.pass;
  if (rest.starts_with("https://")) {
    p.tls = UpstreamTlsConfig{};
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else {
    s.fail(*pass, "pass", "expected \"http://GROUP_OR_ADDRESS[/path]\" or \"https://...\"");
  }
  // "unix:/run/app.sock:/path": the socket's path ends at the next colon.
  size_t end = rest.starts_with("unix:") ? rest.find(':', 5) : rest.find('/');
  p.group = std::string(rest.substr(0, end));
  if (end != std::string_view::npos) {
    std::string_view path = rest.substr(end + (rest.starts_with("unix:") ? 1 : 0));
    if (!path.starts_with('/')) s.fail(*pass, "pass", "the path after the address must start with '/'");
    p.path = std::string(path);
  }
  if (p.group.empty()) s.fail(*pass, "pass", "expected a group or an address after http://");
  return *pass;
}

// host = "..." and the `tls` table of an https:// pass.
void read_host_and_tls(Section& s, const toml::node& pass, ProxyConfig& p) {
  s.get_string("host", &p.host);
  if (p.host.find_first_of("\r\n\0 ", 0, 4) != std::string::npos) s.fail(*s.node("host"), "host", "expected a host name");
  if (const toml::node* tls = s.node("tls")) {
    if (!tls->is_table()) s.fail(*tls, "tls", "expected a table { ca = \"/etc/ssl/upstream-ca.pem\" }");
    if (!p.tls) s.fail(*tls, "tls", "TLS settings need an https:// pass");
    p.tls = read_upstream_tls(s.sub(*tls->as_table(), "tls"));
    if (p.tls->name.empty() && p.tls->verify && p.group.starts_with("unix:")) {
      s.fail(*tls, "tls", "name: required to verify the certificate of a server on a Unix socket");
    }
  } else if (p.tls && p.group.starts_with("unix:")) {
    s.fail(pass, "pass", "a server on a Unix socket over TLS needs tls = { name = \"...\" } (or verify = false)");
  }
}

ProxyConfig read_proxy(Section s, int line, bool prefix_location) {
  ProxyConfig p;
  p.line = line;
  const toml::node& pass = read_pass(s, line, p);
  if (p.path && !prefix_location) {
    s.fail(pass, "pass", "a path in pass replaces a location's prefix: only in a prefix location");
  }
  p.set_headers = read_fields(s, "set_headers");
  for (const auto& [name, value] : p.set_headers) {
    if (value.starts_with("$ssl_client_") && !proxy::is_client_certificate_variable(value)) {
      s.fail(*s.get_table("set_headers")->get(name), "set_headers." + name,
             "\"" + value + "\": expected $ssl_client_s_dn, $ssl_client_i_dn, $ssl_client_verify, "
             "$ssl_client_serial or $ssl_client_fingerprint");
    }
  }
  p.remove_headers = read_removed_fields(s, "remove_headers");
  for (const std::string& name : p.remove_headers) {
    if (http::iequals(name, "Host")) s.fail(*s.node("remove_headers"), "remove_headers", "an HTTP/1.1 request needs its Host");
  }
  if (s.node("connect_timeout") != nullptr) {
    std::chrono::milliseconds timeout{0};
    s.get_duration("connect_timeout", &timeout);
    p.connect_timeout = timeout;
  }
  s.get_duration("read_timeout", &p.read_timeout);
  s.get_duration("send_timeout", &p.send_timeout);
  s.get_bool("request_buffering", &p.request_buffering);
  s.get_bool("response_buffering", &p.response_buffering);
  s.get_size("response_buffer", &p.response_buffer, 0);
  s.get_size("max_temp_file", &p.max_temp_file, 0);
  s.get_size("response_header_bytes", &p.response_head.max_head_bytes, 1024);
  s.get_int("response_headers", &p.response_head.max_headers, 1, 100000);
  if (const toml::node* node = s.node("next_upstream"); node != nullptr && node->is_array()) {
    // nginx's proxy_next_upstream: the conditions, in a list.
    p.next_on_error = p.next_on_timeout = false;
    const auto words = s.get_strings("next_upstream");
    for (const auto& [word, item] : *words) {
      if (word == "error") {
        p.next_on_error = true;
      } else if (word == "timeout") {
        p.next_on_timeout = true;
      } else if (word == "non_idempotent") {
        p.next_non_idempotent = true;
      } else if (word == "403" || word == "404" || word == "429" || word == "500" || word == "502" || word == "503" ||
                 word == "504") {
        p.next_on_status.push_back(std::stoi(word));
      } else {
        s.fail(*item, "next_upstream",
               "\"" + word + "\": expected error, timeout, 403, 404, 429, 500, 502, 503, 504 or non_idempotent");
      }
    }
  } else {
    s.get_bool("next_upstream", &p.next_upstream);
  }
  s.get_int("next_upstream_tries", &p.next_upstream_tries, 0, 64);
  s.get_duration("next_upstream_timeout", &p.next_upstream_timeout);
  s.get_bool("redirect", &p.redirect);
  p.cache = read_cache_use(s);
  read_host_and_tls(s, pass, p);
  s.finish();
  return p;
}

void check_proxies(const std::string& file, const Config& c) {
  auto group = [&c](const std::string& name) -> const UpstreamConfig* {
    for (const UpstreamConfig& u : c.upstreams) {
      if (u.name == name) return &u;
    }
    return nullptr;
  };
  auto check_fastcgi = [&](const FastCgiConfig& f, const std::string& in, const std::string& where) {
    if (f.group.empty()) return;
    const UpstreamConfig* u = group(f.group);
    if (u == nullptr) {
      throw ConfigError(in, f.pass_line, where + ".pass",
                        "\"" + f.group + "\" names no [[upstream]] and is not an address such as 127.0.0.1:9000");
    }
    if (u->proxy_protocol != 0) {
      throw ConfigError(in, f.pass_line, where + ".pass",
                        "the [[upstream]] \"" + f.group + "\" sends the PROXY protocol, which FastCGI servers do not read");
    }
  };
  for (size_t i = 0; i < c.fastcgi.size(); ++i) check_fastcgi(c.fastcgi[i], file, "fastcgi[" + std::to_string(i) + "]");
  for (const SiteConfig& site : c.sites) {
    const std::string& in = site.file.empty() ? file : site.file;
    for (size_t j = 0; j < site.locations.size(); ++j) {
      const LocationConfig& l = site.locations[j];
      const std::string where = site.where + ".location[" + std::to_string(j) + "]";
      for (const FastCgiConfig& f : l.fastcgi) check_fastcgi(f, in, where + ".fastcgi");
      for (const ProxyConfig* proxy : location_proxies(l)) {
        const UpstreamConfig* u = group(proxy->group);
        std::string host;
        uint16_t port = 0;
        if (u == nullptr && !net::SocketAddress::parse(proxy->group) && !parse_host_port(proxy->group, &host, &port)) {
          throw ConfigError(in, proxy->line, where + (l.proxy && proxy == &*l.proxy ? ".proxy.pass" : ".auth_forward.pass"),
                            "\"" + proxy->group +
                                "\" names no [[upstream]] and is neither an address such as 127.0.0.1:3000 nor a "
                                "name and a port such as app:3000");
        }
      }
    }
  }
}

}  // namespace tern::server::config_detail

namespace tern::server {

std::vector<const ProxyConfig*> location_proxies(const LocationConfig& location) {
  std::vector<const ProxyConfig*> proxies;
  if (location.auth_forward && location.auth_forward->check) proxies.push_back(&*location.auth_forward->check);
  if (location.proxy) proxies.push_back(&*location.proxy);
  return proxies;
}

}  // namespace tern::server
