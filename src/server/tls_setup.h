// The web server's HTTPS: for each address marked "tls", the settings of the
// tls::ServerContext its connections are accepted with, made from the sites
// that listen there. Each site with certificates is an identity, chosen by
// the name the client sends (SNI) with the sites' own rules (server_name
// order, as for the Host field); an unknown name or none gets the
// certificates of the site that would answer an unknown Host there (the
// default site), or the first site with certificates.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "server/config/config.h"
#include "server/sites.h"
#include "tls/server_context.h"

namespace tern::server {

struct TlsAddress {
  net::InetAddress address;
  tls::Settings settings;
};

// Loads every certificate and key once to check them: a file that does not
// load, a key that does not match its certificate, a key file any user can
// read throw a ConfigError naming the [tls] or [server.tls] table. What only
// deserves a warning (an expired certificate) is appended to `warnings`.
// `tickets` null: no session tickets.
// `acme`: the TLS-ALPN-01 validations every address answers (null: none).
std::vector<TlsAddress> tls_settings(const Config& config, const std::shared_ptr<const Sites>& sites,
                                     const std::shared_ptr<tls::TicketKeys>& tickets,
                                     std::vector<std::string>* warnings,
                                     std::shared_ptr<const tls::AlpnChallenges> acme = nullptr);

}  // namespace tern::server
