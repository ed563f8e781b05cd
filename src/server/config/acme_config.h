// [acme]: the ACME CA of the sites with [server.tls] acme = true (read by
// config_acme.cc, used by server/acme).
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace tern::server {

// [acme]: the CA the sites with `acme = true` get their certificates from
// (RFC 8555), and where tern keeps its account and their certificates.
struct AcmeConfig {
  bool enabled = false;  // the section is present
  std::string directory = "https://acme-v02.api.letsencrypt.org/directory";
  std::string email;  // the account's contact; empty: none
  bool agree_tos = false;  // the CA's terms of service, agreed (required)
  std::string storage = "/var/lib/tern/acme";
  std::string ca_root;  // PEM file of the roots the CA's HTTPS is trusted by; empty: the system's
  // External account binding (a CA that ties ACME accounts to accounts of
  // its own): the key identifier and the MAC key (base64url) it issued.
  std::string eab_kid;
  std::string eab_hmac_key;
  // The challenges answered; the first the CA offers is used: "http-01"
  // (port 80 of every name reaches a plain listener of tern) or
  // "tls-alpn-01" (port 443 reaches a tls one).
  std::vector<std::string> challenges = {"http-01", "tls-alpn-01"};
  // How often the certificates are looked at (renewal due, the CA's
  // renewal information), and how long before its end a certificate is
  // renewed (0: when two thirds of its lifetime have passed).
  std::chrono::milliseconds check_interval{std::chrono::hours(6)};
  std::chrono::milliseconds renew_before{0};
  // The first wait after a failed order; each failure doubles it, up to
  // check_interval.
  std::chrono::milliseconds retry_after{std::chrono::minutes(1)};
  std::string file;  // the file it is in
  int line = 0;
  bool operator==(const AcmeConfig&) const = default;
};

}  // namespace tern::server
