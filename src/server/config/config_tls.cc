// [tls] and [server.tls]: the certificates a site presents, how it
// negotiates, and the client certificates it asks for; and the session
// settings of [tls] alone.
#include <toml++/toml.h>

#include "server/config/config.h"
#include "server/config/config_section.h"

namespace tern::server::config_detail {

void read_tls(Section& s, int line, TlsConfig* t) {
  t->line = line;
  t->file = s.file();
  t->where = s.prefix().substr(0, s.prefix().size() - 1);
  auto certs = s.get_strings("cert");
  auto keys = s.get_strings("key");
  if (certs || keys) {
    const toml::node* at = s.node(certs ? "cert" : "key");
    if (!certs || !keys || certs->size() != keys->size() || certs->empty()) {
      s.fail(*at, certs ? "key" : "cert", "expected as many key files as cert files (one key per certificate)");
    }
    t->certificates.clear();
    for (size_t i = 0; i < certs->size(); ++i) t->certificates.emplace_back((*certs)[i].first, (*keys)[i].first);
  }
  if (auto protocols = s.get_strings("protocols")) {
    bool v12 = false;
    bool v13 = false;
    for (const auto& [name, node] : *protocols) {
      if (name == "TLSv1.2") {
        v12 = true;
      } else if (name == "TLSv1.3") {
        v13 = true;
      } else {
        s.fail(*node, "protocols", "\"" + name + "\": only \"TLSv1.2\" and \"TLSv1.3\" are offered");
      }
    }
    if (!v12 && !v13) s.fail(*s.node("protocols"), "protocols", "needs TLSv1.2, TLSv1.3 or both");
    t->min_protocol = v12 ? "TLSv1.2" : "TLSv1.3";
    t->max_protocol = v13 ? "TLSv1.3" : "TLSv1.2";
  }
  s.get_string("ciphers", &t->ciphers);
  s.get_string("ciphersuites", &t->ciphersuites);
  s.get_string("curves", &t->curves);
  s.get_bool("prefer_server_ciphers", &t->prefer_server_ciphers);
  // A site's own CAs come without the revocation lists of [tls]'s (they
  // are another CA's), and keep how [tls] asks ("on" if it does not).
  const toml::node* ca = s.node("client_ca");
  s.get_string("client_ca", &t->client_ca);
  if (ca != nullptr) t->client_crl.clear();
  s.get_string("client_crl", &t->client_crl);
  const toml::node* verify = s.node("verify_client");
  if (verify != nullptr) {
    s.get_string("verify_client", &t->verify_client);
    if (t->verify_client != "on" && t->verify_client != "optional" && t->verify_client != "off") {
      s.fail(*verify, "verify_client", "expected \"on\", \"optional\" or \"off\"");
    }
  } else if (ca != nullptr) {
    t->verify_client = t->client_ca.empty() ? "off" : t->verify_client == "off" ? "on" : t->verify_client;
  }
  s.get_int("verify_depth", &t->verify_depth, 1, 100);
  if (const toml::node* node = s.node("acme")) {
    if (s.prefix() == "tls.") s.fail(*node, "acme", "set per site, for its names: [server.tls] acme = true");
    s.get_bool("acme", &t->acme);
    if (t->acme && certs) s.fail(*node, "acme", "a site's certificate comes from cert and key or from ACME, not both");
  }
  if (t->verify_client != "off" && t->client_ca.empty()) {
    const toml::node* at = verify != nullptr ? verify : ca != nullptr ? ca : s.node("client_crl");
    if (at == nullptr) {
      throw ConfigError(s.file(), line, s.prefix() + "client_ca",
                        "required to verify client certificates (a PEM file of the CAs that issue them)");
    }
    s.fail(*at, "client_ca", "required to verify client certificates (a PEM file of the CAs that issue them)");
  }
  if (const toml::node* node = s.node("client_crl"); node != nullptr && t->client_ca.empty()) {
    s.fail(*node, "client_ca", "required with client_crl (a PEM file of the CAs that issue client certificates)");
  }
}

void read_tls_sessions(Section& s, Config& c) {
  TlsSessionConfig& t = c.tls_sessions;
  s.get_bool("session_tickets", &t.tickets);
  s.get_bool("kernel_tls", &t.kernel_tls);
  std::chrono::milliseconds duration{0};
  if (s.node("ticket_key_rotation") != nullptr) {
    s.get_duration("ticket_key_rotation", &duration);
    if (duration < std::chrono::seconds(60)) s.fail(*s.node("ticket_key_rotation"), "ticket_key_rotation", "expected at least \"1m\"");
    t.ticket_key_rotation = std::chrono::duration_cast<std::chrono::seconds>(duration);
  }
  s.get_int("session_cache", &t.cache_entries, 0, 10'000'000);
  if (s.node("session_timeout") != nullptr) {
    s.get_duration("session_timeout", &duration);
    if (duration < std::chrono::seconds(1)) s.fail(*s.node("session_timeout"), "session_timeout", "expected at least \"1s\"");
    t.lifetime = std::chrono::duration_cast<std::chrono::seconds>(duration);
  }
  if (s.node("handshake_timeout") != nullptr) {
    s.get_duration("handshake_timeout", &t.handshake_timeout);
    if (t.handshake_timeout.count() <= 0) s.fail(*s.node("handshake_timeout"), "handshake_timeout", "expected a positive duration");
  }
}

}  // namespace tern::server::config_detail
