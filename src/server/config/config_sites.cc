// The [[server]] and [[server.location]] parts of the config file.
#include <algorithm>
#include <optional>
#include <set>

#include "http/chars.h"
#include "http/request.h"
#include "server/config/config_section.h"
#include "server/handlers/variable_text.h"
#include "server/regex.h"

namespace tern::server::config_detail {
namespace {

// "404" as 404; 0 for anything but digits (or too many of them).
int parse_status(std::string_view text) {
  if (text.empty() || text.size() > 3) return 0;
  int code = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return 0;
    code = code * 10 + (ch - '0');
  }
  return code;
}


// Variables a `return` URL or body may hold; `regex`: the location's,
// whose named groups are variables too.
bool known_variables(std::string_view text, const Regex* regex = nullptr) {
  const VariableText parsed(text);
  if (!parsed.well_formed()) return false;
  for (const VariableText::Variable& variable : parsed.variables()) {
    if (variable.kind != VariableText::Kind::kNamedGroup) continue;
    const int group = regex != nullptr ? regex->group_number(variable.name) : 0;
    if (group <= 0 || group >= 10) return false;
  }
  return true;
}

std::vector<std::string> read_index(Section& s) {
  std::vector<std::string> out;
  if (auto index = s.get_strings("index")) {
    for (const auto& [name, node] : *index) {
      if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
        s.fail(*node, "index", "expected file names");
      }
      out.push_back(name);
    }
    if (out.empty()) s.fail(*s.node("index"), "index", "expected at least one file name");
  }
  return out;
}

void read_root(Section& s, const char* key, std::string* out) {
  s.get_string(key, out);
  if (const toml::node* node = s.node(key); node != nullptr && out->empty()) {
    s.fail(*node, key, "expected a directory");
  }
}

void read_return(Section& s, LocationConfig& l, const Regex* regex) {
  const toml::node* node = s.node("return");
  if (node == nullptr) return;
  ReturnConfig& r = l.ret;
  auto check_status = [&](const toml::node& at, int64_t status) {
    if (status < 200 || status > 599) s.fail(at, "return", "expected a status from 200 to 599");
    r.status = static_cast<int>(status);
  };
  if (node->is_integer()) {
    check_status(*node, node->as_integer()->get());
  } else if (node->is_table()) {
    Section t = s.sub(*node->as_table(), "return");
    const toml::node* status = t.node("status");
    if (status == nullptr || !status->is_integer()) {
      s.fail(*node, "return.status", "required (an integer such as 301)");
    }
    check_status(*status, status->as_integer()->get());
    t.get_string("url", &r.url);
    t.get_string("body", &r.body);
    t.get_string("type", &r.type);
    const bool redirect = r.status == 301 || r.status == 302 || r.status == 303 ||
                          r.status == 307 || r.status == 308;
    if (redirect && r.url.empty()) s.fail(*node, "return.url", "required with a redirect status");
    if (!redirect && t.node("url") != nullptr) {
      s.fail(*t.node("url"), "return.url", "only with 301, 302, 303, 307 or 308");
    }
    if (!known_variables(r.url, regex) || !known_variables(r.body, regex)) {
      s.fail(*node, "return",
             "unknown variable (known: $scheme $host $request_uri $uri $args $is_args $remote_addr $server_name "
             "$server_port $http_NAME $cookie_NAME $arg_NAME $1..$9 and the regex's named groups)");
    }
    if (!valid_field_value(r.url) || !valid_field_value(r.type)) {
      s.fail(*node, "return", "line breaks in url or type");
    }
    t.finish();
  } else {
    s.fail(*node, "return", "expected a status or a table { status = 301, url = \"...\" }");
  }
}

std::vector<std::pair<int, std::string>> read_error_pages(Section& s) {
  std::vector<std::pair<int, std::string>> out;
  const toml::table* table = s.get_table("error_page");
  if (table == nullptr) return out;
  for (const auto& [key, node] : *table) {
    const std::string status(key.str());
    const int code = parse_status(status);
    if (code < 300 || code > 599) {
      s.fail(node, "error_page." + status, "expected a status from 300 to 599 as the key");
    }
    const std::string* text = node.is_string() ? &node.as_string()->get() : nullptr;
    const std::optional<ErrorPageTarget> target = text != nullptr ? parse_error_page(*text) : std::nullopt;
    if (!target || !valid_field_value(*text)) {
      s.fail(node, "error_page." + status,
             "expected a path of the site (\"/errors/404.html\"), a URL to redirect to (\"https://...\"), "
             "either after \"=CODE \" for another status (\"=200 /empty.gif\", \"=301 https://...\")");
    }
    out.emplace_back(code, *text);
  }
  return out;
}

LocationConfig read_location(Section s, int line) {
  LocationConfig l;
  l.line = line;
  std::optional<Regex> compiled;  // a regex location's, for its named groups
  int kinds = 0;
  for (auto [key, match] : {std::pair{"prefix", LocationConfig::Match::kPrefix},
                            std::pair{"exact", LocationConfig::Match::kExact},
                            std::pair{"regex", LocationConfig::Match::kRegex},
                            std::pair{"iregex", LocationConfig::Match::kRegexCaseless},
                            std::pair{"named", LocationConfig::Match::kNamed}}) {
    const toml::node* node = s.node(key);
    if (node == nullptr) continue;
    ++kinds;
    l.match = match;
    s.get_string(key, &l.pattern);
    const bool regex = match == LocationConfig::Match::kRegex || match == LocationConfig::Match::kRegexCaseless;
    if (regex) {
      try {
        compiled.emplace(l.pattern, match == LocationConfig::Match::kRegexCaseless ? Regex::kCaseless : Regex::kNone);
      } catch (const std::invalid_argument& e) {
        s.fail(*node, key, std::string("not a valid regular expression: ") + e.what());
      }
    } else if (match == LocationConfig::Match::kNamed) {
      if (l.pattern.size() < 2 || l.pattern.front() != '@' || l.pattern.find_first_of(" /") != std::string::npos) {
        s.fail(*node, key, "expected a name starting with '@' (\"@app\")");
      }
    } else if (l.pattern.empty() || l.pattern.front() != '/') {
      s.fail(*node, key, "expected a path starting with '/'");
    }
  }
  if (kinds != 1) {
    throw ConfigError(s.file(), line, s.prefix() + "prefix",
                      "a location needs exactly one of prefix, exact, regex, iregex, named");
  }
  s.get_bool("skip_regex", &l.skip_regex);
  if (l.skip_regex && l.match != LocationConfig::Match::kPrefix) {
    s.fail(*s.node("skip_regex"), "skip_regex", "only for a prefix location");
  }
  read_root(s, "root", &l.root);
  read_root(s, "alias", &l.alias);
  if (!l.alias.empty() && !l.root.empty()) s.fail(*s.node("alias"), "alias", "a location has root or alias, not both");
  if (!l.alias.empty() && l.match == LocationConfig::Match::kExact) {
    s.fail(*s.node("alias"), "alias", "for a prefix location, or a regex one with captures (\"/srv/files/$1\")");
  }
  if (!l.alias.empty() && compiled && !known_variables(l.alias, &*compiled)) {
    s.fail(*s.node("alias"), "alias", "unknown variable (a regex location's alias takes $1..$9 and named groups)");
  }
  l.index = read_index(s);
  if (auto files = s.get_strings("try_files")) {
    for (const auto& [item, node] : *files) {
      if (item.empty() || (item.front() != '/' && item.front() != '$' && item.front() != '=' && item.front() != '@')) {
        s.fail(*node, "try_files", "expected paths (\"$uri\", \"/index.html\") or a final \"=404\" or \"@name\"");
      }
      if (!known_variables(item, compiled ? &*compiled : nullptr)) {
        s.fail(*node, "try_files", "unknown variable in \"" + item + "\"");
      }
      l.try_files.push_back(item);
    }
    if (l.try_files.size() < 2) s.fail(*s.node("try_files"), "try_files", "expected candidates and a final URI or \"=CODE\"");
    if (compiled && !l.alias.empty()) s.fail(*s.node("try_files"), "try_files", "not with a regex location's alias");
    const std::string& last = l.try_files.back();
    if (last.front() == '=') {
      const int code = parse_status(std::string_view(last).substr(1));
      if (code < 200 || code > 599) s.fail(*s.node("try_files"), "try_files", "\"=CODE\" needs a status from 200 to 599");
    }
  }
  read_return(s, l, compiled ? &*compiled : nullptr);
  l.headers = read_fields(s, "headers");
  l.headers_always = read_fields(s, "headers_always");
  l.headers_remove = read_removed_fields(s, "headers_remove");
  if (const toml::node* node = s.node("expires")) {
    if (!(node->is_string() && node->as_string()->get() == "off")) {
      std::chrono::milliseconds expires{0};
      s.get_duration("expires", &expires);
      l.expires = std::chrono::duration_cast<std::chrono::seconds>(expires);
    }
  }
  if (const toml::node* node = s.node("deny")) {
    if (node->is_boolean()) {
      l.deny_all = node->as_boolean()->get();
    } else {
      l.deny = read_cidrs(s, "deny");
    }
  }
  l.allow = read_cidrs(s, "allow");
  if (auto rules = s.get_strings("access")) {
    if (l.deny_all || !l.allow.empty() || !l.deny.empty()) {
      s.fail(*s.node("access"), "access", "either access rules or allow and deny, not both");
    }
    for (const auto& [text, node] : *rules) {
      AccessRule rule;
      const size_t space = text.find(' ');
      const std::string_view verb = std::string_view(text).substr(0, space);
      const std::string_view what =
          space == std::string::npos ? std::string_view() : std::string_view(text).substr(text.find_first_not_of(' ', space));
      rule.allow = verb == "allow";
      if ((verb != "allow" && verb != "deny") || what.empty()) {
        s.fail(*node, "access", "\"" + text + "\": expected \"allow NETWORK\", \"deny NETWORK\" or \"deny all\"");
      }
      if (what != "all") {
        rule.network = Cidr::parse(what);
        if (!rule.network) s.fail(*node, "access", "\"" + text + "\": not an address or network (\"10.0.0.0/8\")");
      }
      l.access.push_back(rule);
    }
  }
  if (auto names = s.get_strings("limit")) {
    for (const auto& [name, node] : *names) l.limit.push_back(name);  // checked once every [[limit]] is read
  }
  l.auth_basic = read_auth_basic(s);
  l.auth_forward = read_auth_forward(s);
  s.get_bool("require_client_cert", &l.require_client_cert);
  if (auto methods = s.get_strings("methods")) {
    for (const auto& [name, node] : *methods) {
      const bool token = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
        return (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
      });
      if (!token) s.fail(*node, "methods", "expected method names such as \"GET\" (upper case)");
      l.methods.push_back(name);
    }
  }
  s.get_bool("internal", &l.internal);
  s.get_bool("autoindex", &l.autoindex);
  if (s.node("body_bytes") != nullptr) {
    uint64_t limit = 0;
    s.get_size("body_bytes", &limit, 0);
    l.body_bytes = limit;
  }
  if (s.node("compress") != nullptr) {
    bool compress = false;
    s.get_bool("compress", &compress);
    l.compress = compress;
  }
  l.error_pages = read_error_pages(s);
  s.get_bool("static", &l.static_files);
  s.get_bool("users", &l.users);
  if (const toml::node* node = s.node("metrics")) {
    s.get_string("metrics", &l.metrics);
    if (l.metrics != "prometheus" && l.metrics != "status") {
      s.fail(*node, "metrics", "expected \"prometheus\" (text for Prometheus) or \"status\" (the status page)");
    }
  }
  if (const toml::node* node = s.node("fastcgi")) {
    if (!node->is_table()) s.fail(*node, "fastcgi", "expected a table { pass = \"unix:/run/php/php-fpm.sock\" }");
    l.fastcgi.push_back(read_fastcgi(s.sub(*node->as_table(), "fastcgi"),
                                     static_cast<int>(node->source().begin.line), "\\.php$"));
    l.fastcgi.back().root = l.fastcgi.back().root.empty() ? l.root : l.fastcgi.back().root;
  }
  if (const toml::node* node = s.node("proxy")) {
    if (!node->is_table()) s.fail(*node, "proxy", "expected a table { pass = \"http://127.0.0.1:3000\" }");
    l.proxy = read_proxy(s.sub(*node->as_table(), "proxy"), static_cast<int>(node->source().begin.line),
                         l.match == LocationConfig::Match::kPrefix);
  }
  s.finish();
  return l;
}

SiteConfig read_site(Section s, int line, const Config& c) {
  SiteConfig site;
  site.line = line;
  site.file = s.file();
  site.where = s.prefix().substr(0, s.prefix().size() - 1);
  site.tls = c.tls;
  site.real_ip = c.real_ip;
  if (auto names = s.get_strings("names")) {
    for (const auto& [name, node] : *names) {
      if (name.empty()) s.fail(*node, "names", "expected host names");
      if (name.front() == '~') {
        try {
          Regex check(std::string_view(name).substr(1), Regex::kCaseless);
        } catch (const std::invalid_argument& e) {
          s.fail(*node, "names", "\"" + name + "\": not a valid regular expression: " + e.what());
        }
      } else {
        const size_t stars = static_cast<size_t>(std::count(name.begin(), name.end(), '*'));
        const bool wildcard_ok = stars == 0 || (stars == 1 && (name.starts_with("*.") || name.ends_with(".*")));
        const bool ipv6 = name.front() == '[' && name.back() == ']';
        if (!wildcard_ok || name == "." || name.find_first_of(ipv6 ? " /\t" : " /:\t") != std::string::npos) {
          s.fail(*node, "names", "\"" + name + "\": expected a name, \"*.example.com\", \"example.*\" or \"~regex\"");
        }
      }
      std::string lower = name;
      if (lower.front() != '~') {
        for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      }
      site.names.push_back(std::move(lower));
    }
  }
  read_listen(s, &site.listen);
  s.get_bool("default", &site.is_default);
  read_root(s, "root", &site.root);
  site.index = read_index(s);
  site.error_pages = read_error_pages(s);
  site.headers = read_fields(s, "headers");
  site.headers_always = read_fields(s, "headers_always");
  site.headers_remove = read_removed_fields(s, "headers_remove");
  if (const toml::table* t = s.get_table("tls")) {
    Section tls = s.sub(*t, "tls");
    read_tls(tls, static_cast<int>(t->source().begin.line), &site.tls);
    tls.finish();
  }
  if (const toml::table* t = s.get_table("real_ip")) read_real_ip(s.sub(*t, "real_ip"), *t, &site.real_ip);
  site.auth_basic = read_auth_basic(s);
  site.auth_forward = read_auth_forward(s);
  if (const toml::node* node = s.node("location")) {
    if (!node->is_array_of_tables()) s.fail(*node, "location", "expected [[server.location]] blocks");
    size_t i = 0;
    for (const toml::node& block : *node->as_array()) {
      const std::string name = s.prefix() + "location[" + std::to_string(i++) + "].";
      site.locations.push_back(read_location(Section(s.file(), *block.as_table(), name),
                                             static_cast<int>(block.source().begin.line)));
    }
  }
  s.finish();
  return site;
}

}  // namespace

// Every address marked "tls" has a site with a certificate on it.
void check_tls_addresses(const std::string& file, const Config& c) {
  for (const net::InetAddress& address : tls_addresses(c)) {
    const bool covered = std::any_of(c.sites.begin(), c.sites.end(), [&](const SiteConfig& site) {
      const auto& listen = site.listen.empty() ? c.listen.all : site.listen.all;
      return !site.tls.certificates.empty() && std::find(listen.begin(), listen.end(), address) != listen.end();
    });
    if (!covered) {
      throw ConfigError(file, c.tls.line != 0 ? c.tls.line : c.listen_line, "tls.cert",
                        address.to_ip_port() + " is marked tls, but no site there has a certificate "
                        "([tls] or [server.tls] cert and key)");
    }
  }
}

void read_sites(const Section& top, const toml::node& node, Config& c) {
  if (!node.is_array_of_tables()) top.fail(node, "server", "expected [[server]] blocks");
  size_t i = 0;
  for (const toml::node& block : *node.as_array()) {
    const std::string name = "server[" + std::to_string(i++) + "].";
    c.sites.push_back(read_site(Section(top.file(), *block.as_table(), name),
                                static_cast<int>(block.source().begin.line), c));
  }
}

void finish_sites(const std::string& file, Config& c) {
  std::erase_if(c.sites, [](const SiteConfig& site) { return site.implicit; });
  if (c.sites.empty()) {
    SiteConfig site;
    site.implicit = true;
    LocationConfig everything;
    everything.pattern = "/";
    everything.users = c.auth.enabled;
    everything.fastcgi = c.fastcgi;
    site.locations.push_back(std::move(everything));
    site.tls = c.tls;
    site.real_ip = c.real_ip;
    site.locations.front().require_client_cert = c.tls.verify_client == "on";
    c.sites.push_back(std::move(site));
    check_tls_addresses(file, c);
    return;
  }
  if (!c.fastcgi.empty()) {
    throw ConfigError(file, c.fastcgi.front().line, "fastcgi",
                      "with [[server]] blocks, FastCGI is set in a location ([[server.location]] fastcgi = { ... })");
  }
  std::vector<net::InetAddress> with_default;
  for (SiteConfig& site : c.sites) {
    if (site.locations.empty()) {
      // A site without locations serves its root, as nginx's server {} does.
      LocationConfig everything;
      everything.pattern = "/";
      everything.line = site.line;
      site.locations.push_back(std::move(everything));
    }
    const std::string& in = site.file.empty() ? file : site.file;
    if (site.tls.verify_client != "off" && site.tls.certificates.empty()) {
      throw ConfigError(in, site.tls.line != 0 ? site.tls.line : site.line, site.where + ".tls.verify_client",
                        "the site asks for client certificates in its TLS handshake: it needs a certificate of "
                        "its own (cert, key)");
    }
    for (LocationConfig& l : site.locations) {
      if (!l.auth_basic && site.auth_basic) l.auth_basic = site.auth_basic;
      if (!l.auth_forward && site.auth_forward) l.auth_forward = site.auth_forward;
      if (l.require_client_cert && site.tls.verify_client == "off") {
        throw ConfigError(in, l.line, site.where + ".location.require_client_cert",
                          "the site asks for no client certificate ([server.tls] client_ca, verify_client = "
                          "\"optional\")");
      }
      if (site.tls.verify_client == "on") l.require_client_cert = true;
    }
    if (site.is_default) {
      for (const net::InetAddress& address : site.listen.empty() ? c.listen.all : site.listen.all) {
        if (std::find(with_default.begin(), with_default.end(), address) != with_default.end()) {
          throw ConfigError(in, site.line, site.where + ".default",
                            "another site is the default on " + address.to_ip_port());
        }
        with_default.push_back(address);
      }
    }
    std::set<std::pair<int, std::string>> seen;
    for (const LocationConfig& l : site.locations) {
      if (!l.try_files.empty() && l.try_files.back().front() == '@') {
        const bool found = std::any_of(site.locations.begin(), site.locations.end(), [&](const LocationConfig& n) {
          return n.match == LocationConfig::Match::kNamed && n.pattern == l.try_files.back();
        });
        if (!found) {
          throw ConfigError(in, l.line, site.where + ".location.try_files",
                            "no location of the site is named \"" + l.try_files.back() + "\"");
        }
      }
      if (l.users && !c.auth.enabled) {
        throw ConfigError(in, l.line, site.where + ".location.users", "needs an [auth] section");
      }
      const bool regex = l.match == LocationConfig::Match::kRegex || l.match == LocationConfig::Match::kRegexCaseless;
      if (!regex && !seen.emplace(static_cast<int>(l.match), l.pattern).second) {
        throw ConfigError(in, l.line, site.where + ".location", "duplicate location \"" + l.pattern + "\"");
      }
    }
  }
  finish_acme_sites(file, c);
  check_tls_addresses(file, c);
}

}  // namespace tern::server::config_detail

namespace tern::server {

std::optional<ErrorPageTarget> parse_error_page(std::string_view text) {
  ErrorPageTarget target;
  if (text.starts_with('=')) {
    const size_t space = text.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    const std::string_view code = text.substr(1, space - 1);
    int status = 0;
    for (char c : code) {
      if (c < '0' || c > '9' || status > 999) return std::nullopt;
      status = status * 10 + (c - '0');
    }
    if (code.size() != 3 || status < 200 || status > 599) return std::nullopt;
    target.status = status;
    text = text.substr(text.find_first_not_of(' ', space) == std::string_view::npos ? text.size()
                                                                                      : text.find_first_not_of(' ', space));
  }
  if (text.starts_with("http://") || text.starts_with("https://")) {
    const bool redirect = target.status == 0 || target.status == 301 || target.status == 302 ||
                          target.status == 303 || target.status == 307 || target.status == 308;
    if (!redirect || text.size() <= 8) return std::nullopt;
    target.url = text;
    return target;
  }
  if (text.empty() || text.front() != '/' || text.find(' ') != std::string_view::npos) return std::nullopt;
  target.path = text;
  return target;
}

}  // namespace tern::server
