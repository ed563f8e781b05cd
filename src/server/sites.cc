#include "server/sites.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

#include "server/handlers/static_handler.h"
#include "server/observability/metrics.h"

namespace tern::server {
namespace {

bool is_regex(const LocationConfig& l) {
  return l.match == LocationConfig::Match::kRegex || l.match == LocationConfig::Match::kRegexCaseless;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string trim_slashes(std::string root) {
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root;
}

// A location's response fields over its site's: a field the location
// names replaces the site's of that name, an empty value takes it out, and
// both lists of removals count. Without the location, the site's alone.
http::ExtraFields format_fields(const SiteConfig& site, const LocationConfig* l) {
  using Fields = LocationConfig::Fields;
  std::vector<std::string> remove = site.headers_remove;
  if (l != nullptr) remove.insert(remove.end(), l->headers_remove.begin(), l->headers_remove.end());
  const auto merged = [&](const Fields& outer, const Fields* inner) {
    Fields out;
    for (const auto& [name, value] : outer) {
      const bool replaced = inner != nullptr && std::any_of(inner->begin(), inner->end(), [&](const auto& field) {
                              return http::iequals(field.first, name);
                            });
      if (!replaced) out.emplace_back(name, value);
    }
    if (inner != nullptr) out.insert(out.end(), inner->begin(), inner->end());
    return out;
  };
  const Fields always = merged(site.headers_always, l != nullptr ? &l->headers_always : nullptr);
  const Fields success = merged(site.headers, l != nullptr ? &l->headers : nullptr);
  for (const Fields* fields : {&always, &success}) {
    for (const auto& [name, value] : *fields) {
      if (value.empty()) remove.push_back(name);
    }
  }
  http::ExtraFields out;
  for (std::string& name : remove) {
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  out.remove = std::move(remove);
  const auto add = [&out](http::FieldBlock& block, const Fields& fields) {
    for (const auto& [name, value] : fields) {
      if (!value.empty() && !out.removes(name)) block.add(name, value);
    }
  };
  add(out.always, always);
  add(out.success, success);
  if (l != nullptr && l->expires) out.success.add("Cache-Control", "max-age=" + std::to_string(l->expires->count()));
  return out;
}

std::string location_root(const Config& config, const SiteConfig& site, const LocationConfig& l) {
  if (!l.alias.empty()) return is_regex(l) ? split_regex_alias(l.alias).root : l.alias;
  if (!l.root.empty()) return l.root;
  return site.root.empty() ? config.static_files.root : site.root;
}

}  // namespace

std::vector<FastCgiConfig> fastcgi_blocks(const Config& config) {
  std::vector<FastCgiConfig> blocks;
  for (const SiteConfig& site : config.sites) {
    for (const LocationConfig& l : site.locations) {
      for (FastCgiConfig block : l.fastcgi) {
        if (block.root.empty()) block.root = trim_slashes(location_root(config, site, l));
        blocks.push_back(std::move(block));
      }
    }
  }
  return blocks;
}

std::optional<std::string_view> normalize_host(std::string_view host, char (&buffer)[256]) {
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = host.substr(0, close + 1);
  } else if (const size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    host = host.substr(0, colon);
  }
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);
  if (host.empty() || host.size() > sizeof buffer) return std::nullopt;
  for (size_t i = 0; i < host.size(); ++i) {
    const char ch = host[i];
    buffer[i] = ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch;
  }
  return std::string_view(buffer, host.size());
}

std::string_view Site::error_page(const Location* location, int status) const {
  const auto& pages = location != nullptr ? *location->error_pages : config_.error_pages;
  for (const auto& [code, path] : pages) {
    if (code == status) return path;
  }
  return {};
}

bool Site::wants_slash(std::string_view path) const {
  for (const Location* l : slash_redirects_) {
    const std::string_view pattern = l->config.pattern;
    if (pattern.size() == path.size() + 1 && pattern.starts_with(path)) {
      return std::none_of(exact_.begin(), exact_.end(), [path](const Location* e) { return e->config.pattern == path; });
    }
  }
  return false;
}

const Location* Site::match(std::string_view path, Captures* captures) const {
  if (everything_ != nullptr) return everything_;  // one location for every path
  for (const Location* l : exact_) {
    if (l->config.pattern == path) return l;
  }
  const Location* longest = nullptr;
  for (const Location* l : prefixes_) {
    if (path.starts_with(l->config.pattern)) {
      longest = l;
      break;
    }
  }
  if (longest != nullptr && longest->config.skip_regex) return longest;
  for (const Location* l : regexes_) {
    if (l->regex->search(path, captures)) return l;
  }
  return longest;
}

const Location* Site::named(std::string_view name) const {
  for (const Location& l : locations_) {
    if (l.config.match == LocationConfig::Match::kNamed && l.config.pattern == name) return &l;
  }
  return nullptr;
}

Sites::Sites(const Config& config, Metrics* metrics)
    : fastcgi_(fastcgi_blocks(config)), compression_(config.compression.policy) {
  for (const SiteConfig& site : config.sites) add_site(config, site, metrics);
  if (sites_.empty()) throw std::runtime_error(config.source + ": no site");
  // Every root must open now, where the operator sees the error.
  for (const StaticStore& store : stores_) {
    const int fd = ::open(store.root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error("cannot open document root " + store.root);
    ::close(fd);
  }
}

size_t Sites::store_for(std::string root, std::vector<std::string> index, bool autoindex) {
  root = trim_slashes(std::move(root));
  for (size_t i = 0; i < stores_.size(); ++i) {
    const StaticStore& s = stores_[i];
    if (s.root == root && s.index == index && s.autoindex == autoindex) return i;
  }
  stores_.push_back({std::move(root), std::move(index), autoindex});
  return stores_.size() - 1;
}

void Sites::add_site(const Config& config, const SiteConfig& site_config, Metrics* metrics) {
  auto site = std::make_unique<Site>();
  site->config_ = site_config;
  site->fields_ = format_fields(site_config, nullptr);
  const std::string site_name = site_label(site_config.names);
  if (metrics != nullptr) site->series_ = metrics->request_series(site_name, "");
  const std::vector<std::string>& site_index =
      site_config.index.empty() ? config.static_files.index : site_config.index;
  site->locations_.reserve(site_config.locations.size());
  for (const LocationConfig& lc : site_config.locations) {
    Location& l = site->locations_.emplace_back();
    l.config = lc;
    l.id = location_count_++;
    if (metrics != nullptr) l.series = metrics->request_series(site_name, location_label(lc));
    if (is_regex(lc)) {
      l.regex.emplace(lc.pattern, lc.match == LocationConfig::Match::kRegexCaseless ? Regex::kCaseless
                                                                                      : Regex::kNone);
    }
    l.alias = !lc.alias.empty();
    if (l.alias && !lc.fastcgi.empty()) {
      throw std::runtime_error(config.source + ":" + std::to_string(lc.line) +
                               ": server.location.alias: not with fastcgi (use root)");
    }
    l.store = store_for(location_root(config, site_config, lc), lc.index.empty() ? site_index : lc.index,
                        lc.autoindex);
    for (size_t i = 0; i < lc.fastcgi.size(); ++i) l.fastcgi.push_back(fastcgi_count_++);
    l.allow = join(lc.methods);
    l.error_pages = lc.error_pages.empty() ? &site->config_.error_pages : &l.config.error_pages;
    l.fields = format_fields(site_config, &lc);
    if (lc.compress.value_or(config.compression.enabled)) l.compression = &compression_;
    needs_users_ = needs_users_ || lc.users;
  }
  for (const Location& l : site->locations_) {
    if (l.config.match == LocationConfig::Match::kExact) site->exact_.push_back(&l);
    if (l.config.match == LocationConfig::Match::kPrefix) site->prefixes_.push_back(&l);
    // nginx's auto_redirect: a proxy or FastCGI location "/p/" takes "/p"
    // as a 301 to "/p/" (a static location finds the directory itself).
    if (l.config.match == LocationConfig::Match::kPrefix && l.config.pattern.size() > 1 &&
        l.config.pattern.back() == '/' && (l.config.proxy || !l.config.fastcgi.empty())) {
      site->slash_redirects_.push_back(&l);
    }
    if (is_regex(l.config)) site->regexes_.push_back(&l);
  }
  std::stable_sort(site->prefixes_.begin(), site->prefixes_.end(), [](const Location* a, const Location* b) {
    return a->config.pattern.size() > b->config.pattern.size();
  });
  if (site->locations_.size() == 1 && site->prefixes_.size() == 1 && site->prefixes_[0]->config.pattern == "/") {
    site->everything_ = site->prefixes_[0];
  }
  const Site* raw = site.get();
  for (const net::InetAddress& address : site_config.listen.empty() ? config.listen.all : site_config.listen.all) {
    auto table = std::find_if(tables_.begin(), tables_.end(),
                              [&address](const NameTable& t) { return t.address == address; });
    if (table == tables_.end()) {
      tables_.emplace_back();
      tables_.back().address = address;
      table = tables_.end() - 1;
    }
    table->add(raw);
  }
  sites_.push_back(std::move(site));
}

void Sites::NameTable::add(const Site* site) {
  const SiteConfig& config = site->config();
  if (default_site == nullptr || config.is_default) default_site = site;
  for (const std::string& name : config.names) {
    // The first site to claim a name keeps it, as in nginx (which warns).
    if (name.front() == '~') {
      regexes.emplace_back(Regex(std::string_view(name).substr(1), Regex::kCaseless), site);
    } else if (name.front() == '.') {
      exact.emplace(name.substr(1), site);
      leading.emplace(name, site);
    } else if (name.starts_with("*.")) {
      leading.emplace(name.substr(1), site);
    } else if (name.ends_with(".*")) {
      trailing.emplace(name.substr(0, name.size() - 1), site);
    } else {
      exact.emplace(name, site);
    }
  }
}

const Site& Sites::NameTable::select(std::string_view host) const {
  char buffer[256];
  std::optional<std::string_view> name = normalize_host(host, buffer);
  if (!name) return *default_site;
  std::string key(*name);
  if (auto it = exact.find(key); it != exact.end()) return *it->second;
  if (!leading.empty()) {
    // ".example.com" before ".com": the longest suffix is the first dot.
    for (size_t dot = key.find('.'); dot != std::string::npos; dot = key.find('.', dot + 1)) {
      if (auto it = leading.find(key.substr(dot)); it != leading.end()) return *it->second;
    }
  }
  if (!trailing.empty()) {
    for (size_t dot = key.rfind('.'); dot != std::string::npos && dot > 0; dot = key.rfind('.', dot - 1)) {
      if (auto it = trailing.find(key.substr(0, dot + 1)); it != trailing.end()) return *it->second;
    }
  }
  for (const auto& [regex, site] : regexes) {
    if (regex.search(*name)) return *site;
  }
  return *default_site;
}

const Sites::NameTable& Sites::table_for(const net::InetAddress& local) const {
  if (tables_.size() == 1) return tables_.front();
  const NameTable* wildcard = nullptr;
  for (const NameTable& table : tables_) {
    if (table.address == local) return table;
    if (wildcard == nullptr && table.address.covers(local)) wildcard = &table;
  }
  return wildcard != nullptr ? *wildcard : tables_.front();
}

const Site& Sites::select_by_name(std::string_view host, const net::InetAddress& local) const {
  return table_for(local).select(host);
}

std::vector<net::InetAddress> listen_addresses(const Config& config) {
  std::vector<net::InetAddress> out;
  auto add = [&out](const std::vector<net::InetAddress>& addresses) {
    for (const net::InetAddress& a : addresses) {
      if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
    }
  };
  for (const SiteConfig& site : config.sites) add(site.listen.empty() ? config.listen.all : site.listen.all);
  if (out.empty()) add(config.listen.all);
  return out;
}

}  // namespace tern::server
