#include "server/tls_setup.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace tern::server {
namespace {

tls::Identity identity_of(const TlsConfig& t) {
  tls::Identity identity;
  for (const auto& [cert, key] : t.certificates) identity.pairs.push_back({cert, key});
  identity.min_protocol = t.min_protocol;
  identity.max_protocol = t.max_protocol;
  if (!t.ciphers.empty()) identity.ciphers = t.ciphers;
  if (!t.ciphersuites.empty()) identity.ciphersuites = t.ciphersuites;
  if (!t.curves.empty()) identity.curves = t.curves;
  identity.prefer_server_ciphers = t.prefer_server_ciphers;
  identity.verify_client = t.verify_client == "on"         ? tls::VerifyClient::kOn
                           : t.verify_client == "optional" ? tls::VerifyClient::kOptional
                                                           : tls::VerifyClient::kOff;
  identity.client_ca = t.client_ca;
  identity.client_crl = t.client_crl;
  identity.verify_depth = t.verify_depth;
  return identity;
}

// Loads `identity` on its own, so that what fails is pinned to its table.
void check(const Config& config, const TlsConfig& t, const tls::Identity& identity,
           std::vector<std::string>* warnings) {
  try {
    tls::Settings settings;
    settings.identities.push_back(identity);
    tls::ServerContext loaded(std::move(settings));
  } catch (const std::exception& e) {
    // What failed names its key ("client_ca FILE: ...").
    const std::string_view what = e.what();
    const char* key = what.starts_with("client_ca") ? ".client_ca" : what.starts_with("client_crl") ? ".client_crl" : ".cert";
    throw ConfigError(t.file.empty() ? config.source : t.file, t.line, t.where + key, e.what());
  }
  for (const tls::CertificatePair& pair : identity.pairs) {
    for (std::string& warning : tls::certificate_warnings(pair)) {
      warnings->push_back((t.file.empty() ? config.source : t.file) + ":" + std::to_string(t.line) + ": " + t.where +
                          ".cert: " + warning);
    }
  }
}

}  // namespace

std::vector<TlsAddress> tls_settings(const Config& config, const std::shared_ptr<const Sites>& sites,
                                     const std::shared_ptr<tls::TicketKeys>& tickets,
                                     std::vector<std::string>* warnings,
                                     std::shared_ptr<const tls::AlpnChallenges> acme) {
  std::vector<TlsAddress> out;
  std::vector<tls::Identity> checked;
  for (const net::InetAddress& address : tls_addresses(config)) {
    TlsAddress entry{address, {}};
    tls::Settings& settings = entry.settings;
    std::map<const Site*, size_t> by_site;
    for (const auto& site : sites->sites()) {
      const SiteConfig& sc = site->config();
      const auto& listen = sc.listen.empty() ? config.listen.all : sc.listen.all;
      if (sc.tls.certificates.empty() || std::find(listen.begin(), listen.end(), address) == listen.end()) {
        continue;
      }
      tls::Identity identity = identity_of(sc.tls);
      auto same = std::find(settings.identities.begin(), settings.identities.end(), identity);
      if (same == settings.identities.end()) {
        if (std::find(checked.begin(), checked.end(), identity) == checked.end()) {
          check(config, sc.tls, identity, warnings);
          checked.push_back(identity);
        }
        settings.identities.push_back(std::move(identity));
        same = settings.identities.end() - 1;
      }
      by_site[site.get()] = static_cast<size_t>(same - settings.identities.begin());
    }
    if (settings.identities.empty()) {
      throw ConfigError(config.source, config.tls.line, "tls.cert",
                        address.to_ip_port() + " is marked tls, but no site there has a certificate");
    }
    // What an unknown name gets: the certificates of the site an unknown
    // Host gets, when it has some.
    if (auto it = by_site.find(&sites->select("", address)); it != by_site.end()) {
      settings.default_identity = it->second;
    }
    if (settings.identities.size() > 1) {
      settings.select = [sites, address, by_site](std::string_view name) -> std::optional<size_t> {
        auto it = by_site.find(&sites->select(name, address));
        if (it == by_site.end()) return std::nullopt;
        return it->second;
      };
    }
    // HTTP/2 first: a client that speaks both gets it.
    const std::vector<net::InetAddress> http1_only = flagged_addresses(config, &ListenConfig::no_h2);
    if (config.http2.enabled && std::find(http1_only.begin(), http1_only.end(), address) == http1_only.end()) {
      settings.alpn = {"h2", "http/1.1"};
    }
    const TlsSessionConfig& sessions = config.tls_sessions;
    if (sessions.tickets) settings.tickets = tickets;
    settings.session_cache_entries = sessions.cache_entries;
    settings.session_lifetime = sessions.lifetime;
    settings.handshake_timeout = sessions.handshake_timeout;
    settings.kernel_tls = sessions.kernel_tls;
    settings.acme = acme;
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace tern::server
