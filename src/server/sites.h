// Sites: the [[server]] and [[server.location]] blocks of a Config,
// compiled for the two questions every request asks: which site does its
// Host name, and which location of that site does its path fall in.
//
//   Sites sites(config);                       // throws std::runtime_error
//   const Site& site = sites.select(request.host());
//   Captures captures;
//   const Location* where = site.match("/img/a.png", &captures);
//
// Each address the server listens on has its own sites: those whose
// `listen` names it (or, without `listen`, the top-level addresses); a
// connection to 10.0.0.1:80 is served by the sites on 10.0.0.1:80, else by
// those on *:80. Among them, host names are matched as nginx's
// server_name: the exact name first,
// then the longest wildcard starting with "*." (".example.com" is both
// example.com and *.example.com), then the longest ending with ".*", then
// regular expressions ("~...") in file order; anything else (an unknown
// name, no Host at all) goes to the site marked default, else the first.
// The Host is compared without case, port or trailing dot; an IPv6
// literal keeps its brackets ("[::1]").
//
// Locations follow nginx's precedence, on the decoded and normalised path:
// an exact location that equals the path wins at once; otherwise the
// longest prefix is remembered, and unless it says skip_regex the regular
// expressions are tried in file order, the first that matches winning;
// otherwise the longest prefix. No match at all is nullptr (404).
//
// What a location needs at run time that its config only implies is
// resolved here once: the root (location, else site, else [static]),
// the index names, the static store it reads files through (locations
// with the same root and index share one), its FastCGI blocks, and its
// response fields formatted for the ResponseWriter.
//
// Immutable once built; any thread. Replaced whole on reload.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "http/response_writer.h"
#include "server/config/config.h"
#include "server/regex.h"

namespace tern::server {

class Metrics;

// A document root and its index names: what a per-loop StaticFiles is
// opened on.
struct StaticStore {
  std::string root;
  std::vector<std::string> index;
  bool autoindex = false;
};

struct Location {
  LocationConfig config;
  size_t id = 0;               // unique across the sites, from 0 (Sites::location_count())
  std::optional<Regex> regex;  // regex and iregex locations
  size_t store = 0;            // index into Sites::stores()
  bool alias = false;          // the store's root replaces the prefix
  std::vector<size_t> fastcgi;  // indexes into Sites::fastcgi(), tried in order
  std::string allow;           // config.methods joined, for a 405's Allow
  const std::vector<std::pair<int, std::string>>* error_pages = nullptr;  // its own, or the site's
  http::ExtraFields fields;    // headers and expires
  const http::CompressionPolicy* compression = nullptr;  // null: not compressed on the fly
  uint32_t series = 0;         // its requests' metrics series (server/observability/metrics.h)
};

class Site {
 public:
  const Location* match(std::string_view path, Captures* captures) const;
  // The location named `name` ("@app"), for a try_files that ends there.
  const Location* named(std::string_view name) const;
  // Whether `path` is a proxy or FastCGI location's prefix without its
  // final slash ("/app" for "/app/") and no exact location is `path`: as
  // nginx, such a request is 301 to the slash, before any location.
  bool wants_slash(std::string_view path) const;
  const SiteConfig& config() const { return config_; }
  // The site's own response fields, for what no location answers.
  const http::ExtraFields& fields() const { return fields_; }
  // The page for `status` of `location` (its own error pages, else the
  // site's), or an empty view.
  std::string_view error_page(const Location* location, int status) const;
  const std::vector<Location>& locations() const { return locations_; }
  // The metrics series of its requests that no location took.
  uint32_t series() const { return series_; }

 private:
  friend class Sites;
  SiteConfig config_;
  http::ExtraFields fields_;
  uint32_t series_ = 0;
  std::vector<Location> locations_;
  std::vector<const Location*> exact_;
  std::vector<const Location*> prefixes_;  // longest first
  std::vector<const Location*> regexes_;   // in file order
  const Location* everything_ = nullptr;   // the only location, when it is prefix "/"
  std::vector<const Location*> slash_redirects_;  // wants_slash()
};

class Sites {
 public:
  // `config.sites` compiled (finish_sites() made one when the file has
  // none), each site and location with its series of `metrics` (none:
  // series 0). Throws std::runtime_error naming the file and line of a
  // site whose root cannot be opened.
  explicit Sites(const Config& config, Metrics* metrics = nullptr);
  Sites(const Sites&) = delete;
  Sites& operator=(const Sites&) = delete;

  // The site for a Host field value ("Example.COM:8080", "[::1]", "") on
  // a connection to `local` (the address it was accepted on).
  const Site& select(std::string_view host, const net::InetAddress& local) const {
    return sites_.size() == 1 ? *sites_.front() : select_by_name(host, local);
  }
  const Site& select(std::string_view host) const { return select(host, tables_.front().address); }

  const std::vector<std::unique_ptr<Site>>& sites() const { return sites_; }
  const std::vector<StaticStore>& stores() const { return stores_; }
  // Every FastCGI block of every location, roots resolved.
  const std::vector<FastCgiConfig>& fastcgi() const { return fastcgi_; }
  bool needs_users() const { return needs_users_; }
  size_t location_count() const { return location_count_; }

 private:
  // The sites of one listening address, by name.
  struct NameTable {
    net::InetAddress address;
    const Site* default_site = nullptr;
    std::unordered_map<std::string, const Site*> exact;
    std::unordered_map<std::string, const Site*> leading;   // "*.example.com" kept as ".example.com"
    std::unordered_map<std::string, const Site*> trailing;  // "example.*" kept as "example."
    std::vector<std::pair<Regex, const Site*>> regexes;
    void add(const Site* site);
    const Site& select(std::string_view host) const;
  };

  void add_site(const Config& config, const SiteConfig& site_config, Metrics* metrics);
  const Site& select_by_name(std::string_view host, const net::InetAddress& local) const;
  const NameTable& table_for(const net::InetAddress& local) const;
  size_t store_for(std::string root, std::vector<std::string> index, bool autoindex);

  std::vector<std::unique_ptr<Site>> sites_;
  std::vector<StaticStore> stores_;
  std::vector<FastCgiConfig> fastcgi_;
  size_t fastcgi_count_ = 0;  // numbered while the sites are added
  std::vector<NameTable> tables_;  // one per listening address
  http::CompressionPolicy compression_;
  bool needs_users_ = false;
  size_t location_count_ = 0;
};

// Every address some site listens on: the top-level `listen` (when a site
// has none of its own) and each site's, once each, in file order.
std::vector<net::InetAddress> listen_addresses(const Config& config);

// Every FastCGI block of the config's locations, in the order Sites
// numbers them, each with its root resolved (block, location, site,
// [static]).
std::vector<FastCgiConfig> fastcgi_blocks(const Config& config);

// The Host value as names are compared: lower case, without port and
// trailing dot; nullopt when it cannot be a name (too long, empty).
std::optional<std::string_view> normalize_host(std::string_view host, char (&buffer)[256]);

}  // namespace tern::server
