// [acme] and the sites with [server.tls] acme = true: the CA, the account's
// settings and the storage; each such site's names checked (exact host
// names: a wildcard needs DNS-01, which tern does not do) and its
// certificate's files named in the storage (server/acme/acme_storage.h
// lays them out the same way).
#include <toml++/toml.h>

#include <algorithm>
#include <set>

#include "server/acme/acme_storage.h"
#include "server/config/config.h"
#include "server/config/config_section.h"

namespace tern::server::config_detail {
namespace {

// A host name a public CA can validate: dot-separated labels of letters,
// digits and hyphens (lower case here), none empty, not an IP address.
bool is_host_name(const std::string& name) {
  if (name.empty() || name.size() > 253 || name.front() == '.' || name.back() == '.') return false;
  size_t label = 0;
  bool all_digits_and_dots = true;
  for (char c : name) {
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
      continue;
    }
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok || ++label > 63) return false;
    if (c < '0' || c > '9') all_digits_and_dots = false;
  }
  return !all_digits_and_dots;
}

}  // namespace

void read_acme(Section& s, int line, Config& c) {
  AcmeConfig& a = c.acme;
  a.enabled = true;
  a.file = s.file();
  a.line = line;
  s.get_string("directory", &a.directory);
  if (!a.directory.starts_with("https://")) s.fail(*s.node("directory"), "directory", "expected an https:// URL");
  s.get_string("email", &a.email);
  if (const toml::node* node = s.node("email");
      node != nullptr && (a.email.find('@') == std::string::npos || a.email.find_first_of(" ,<>") != std::string::npos)) {
    s.fail(*node, "email", "expected an address such as \"ops@example.com\"");
  }
  s.get_bool("agree_tos", &a.agree_tos);
  s.get_string("storage", &a.storage);
  if (a.storage.empty()) s.fail(*s.node("storage"), "storage", "expected a directory");
  s.get_string("ca_root", &a.ca_root);
  if (const toml::table* eab = s.get_table("eab")) {
    Section e = s.sub(*eab, "eab");
    e.get_string("kid", &a.eab_kid);
    e.get_string("hmac_key", &a.eab_hmac_key);
    if (a.eab_kid.empty() || a.eab_hmac_key.empty()) {
      s.fail(*eab, "eab", "expected { kid = \"...\", hmac_key = \"...\" } as the CA issued them");
    }
    e.finish();
  }
  if (auto challenges = s.get_strings("challenges")) {
    a.challenges.clear();
    for (const auto& [name, node] : *challenges) {
      if (name != "http-01" && name != "tls-alpn-01") {
        s.fail(*node, "challenges", "\"" + name + "\": expected \"http-01\" or \"tls-alpn-01\" (tern does not do DNS-01)");
      }
      if (std::find(a.challenges.begin(), a.challenges.end(), name) == a.challenges.end()) a.challenges.push_back(name);
    }
    if (a.challenges.empty()) s.fail(*s.node("challenges"), "challenges", "expected \"http-01\", \"tls-alpn-01\" or both");
  }
  s.get_duration("check_interval", &a.check_interval);
  if (const toml::node* node = s.node("check_interval"); node != nullptr && a.check_interval < std::chrono::seconds(1)) {
    s.fail(*node, "check_interval", "expected at least \"1s\"");
  }
  s.get_duration("renew_before", &a.renew_before);
  s.get_duration("retry_after", &a.retry_after);
  if (const toml::node* node = s.node("retry_after"); node != nullptr && a.retry_after < std::chrono::seconds(1)) {
    s.fail(*node, "retry_after", "expected at least \"1s\"");
  }
}

void finish_acme_sites(const std::string& file, Config& c) {
  std::set<std::string> taken;
  for (SiteConfig& site : c.sites) {
    if (!site.tls.acme) continue;
    const std::string& in = site.file.empty() ? file : site.file;
    const std::string key = site.where + ".tls.acme";
    if (!c.acme.enabled) {
      throw ConfigError(in, site.tls.line, key, "needs an [acme] section (the CA, agree_tos, storage)");
    }
    if (!c.acme.agree_tos) {
      throw ConfigError(c.acme.file.empty() ? file : c.acme.file, c.acme.line, "acme.agree_tos",
                        "the CA's terms of service must be agreed to (agree_tos = true) before it issues certificates");
    }
    if (site.names.empty()) {
      throw ConfigError(in, site.tls.line, key, "the site needs its names (server_name) to have a certificate issued");
    }
    for (const std::string& name : site.names) {
      if (name.front() == '~' || name.find('*') != std::string::npos || name.front() == '.') {
        throw ConfigError(in, site.tls.line, key,
                          "\"" + name + "\": ACME issues certificates for exact names here (a wildcard needs DNS-01, "
                          "which tern does not do); name the hosts, or bring the certificate (cert, key)");
      }
      if (!is_host_name(name)) {
        throw ConfigError(in, site.tls.line, key, "\"" + name + "\": not a host name a CA can validate");
      }
      if (!taken.insert(name).second) {
        throw ConfigError(in, site.tls.line, key, "\"" + name + "\": another site with acme has this name");
      }
    }
    const AcmeStorage storage(c.acme.storage);
    site.tls.certificates = {{storage.certificate_path(site.names.front()), storage.key_path(site.names.front())}};
  }
}

}  // namespace tern::server::config_detail
