// ServerContext: TLS for the connections accepted on a listening address,
// on OpenSSL 3 (a net::SecureContext; give it to TcpServer::set_secure_context).
//
// It holds one OpenSSL context per identity (a site's certificates: an ECDSA
// and an RSA pair may sit side by side, the client's algorithms pick), picks
// the identity by the name the client asks for (SNI) through the selector
// it was given, and the default one without a name or for an unknown one.
// TLS 1.2 and 1.3 only; by default Mozilla's "intermediate" policy. ALPN
// offers what the settings list (http/1.1). Sessions resume by ticket (keys
// from a TicketKeys ring, shared by every context of the process and rotated
// on a schedule) or, for TLS 1.2 clients without tickets, from a session
// cache.
//
// update() swaps in new settings (certificates renewed on disk) for the
// connections accepted from then on; established ones keep what they began
// with. Thread-safe: layers are made on any loop.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/secure_layer.h"
#include "tls/openssl_layer.h"
#include "tls/ticket_keys.h"

namespace tern::tls {

// Mozilla's "intermediate" configuration (TLS 1.2 ciphers; TLS 1.3 suites).
inline constexpr const char* kIntermediateCiphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305";
inline constexpr const char* kIntermediateSuites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
inline constexpr const char* kIntermediateCurves = "X25519:prime256v1:secp384r1";

struct CertificatePair {
  std::string cert;  // the path of a PEM file: the certificate, then its chain
  std::string key;   // the path of a PEM file: the private key
  bool operator==(const CertificatePair&) const = default;
};

// Whether a site asks its clients for a certificate (mutual TLS). The
// handshake goes on whatever the client sends (none, or one that does not
// verify); what was found is the layer's peer_certificate(), for the
// requests to be refused or admitted above (as nginx: a page says why,
// where a failed handshake would leave a browser with a cryptic error).
enum class VerifyClient : uint8_t { kOff, kOn, kOptional };

// What one site presents, and how it negotiates.
struct Identity {
  std::vector<CertificatePair> pairs;
  std::string min_protocol = "TLSv1.2";  // or "TLSv1.3"
  std::string max_protocol = "TLSv1.3";
  std::string ciphers = kIntermediateCiphers;      // TLS 1.2 (OpenSSL cipher list)
  std::string ciphersuites = kIntermediateSuites;  // TLS 1.3
  std::string curves = kIntermediateCurves;
  bool prefer_server_ciphers = false;
  // Client certificates: the CAs (PEM) that issue them, revocation lists
  // (PEM; optional), how many CAs may stand between a client's certificate
  // and one of those (nginx's ssl_verify_depth).
  VerifyClient verify_client = VerifyClient::kOff;
  std::string client_ca;
  std::string client_crl;
  int verify_depth = 1;
  bool operator==(const Identity&) const = default;
};

// TLS-ALPN-01 (RFC 8737): the certificates that answer an ACME CA's
// validation connections while an order is pending. A ClientHello that
// offers the ALPN protocol "acme-tls/1" for a name held here gets that
// name's certificate (and no other), "acme-tls/1" agreed, and the
// connection closed once the handshake is over. Thread-safe: set by the
// thread that orders, read by handshakes on any loop.
class AlpnChallenges {
 public:
  static constexpr std::string_view kProtocol = "acme-tls/1";

  AlpnChallenges();
  ~AlpnChallenges();
  // `name` (lower case) answered with the certificate and key (PEM) from
  // now on. Throws std::runtime_error when they do not parse.
  void add(const std::string& name, std::string_view cert_pem, std::string_view key_pem);
  void remove(std::string_view name);
  // Puts `name`'s certificate and key on `ssl`, in place of any it had;
  // false when there is none for it.
  bool use(SSL* ssl, std::string_view name) const;

 private:
  struct Pair;
  mutable std::mutex mu_;
  std::vector<std::pair<std::string, std::shared_ptr<const Pair>>> pending_;  // guarded by mu_
};

struct Settings {
  std::vector<Identity> identities;  // at least one
  size_t default_identity = 0;
  // The identity for a server name (lower case, no trailing dot); nullopt:
  // the default one. Null: every name gets the default.
  std::function<std::optional<size_t>(std::string_view name)> select;
  std::vector<std::string> alpn = {"http/1.1"};  // in the server's order of preference
  std::shared_ptr<TicketKeys> tickets;  // null: no session tickets
  size_t session_cache_entries = 20000;  // 0: no session cache
  std::chrono::seconds session_lifetime{3600};
  std::chrono::milliseconds handshake_timeout{10000};
  // TLS-ALPN-01 validations answered (null: none).
  std::shared_ptr<const AlpnChallenges> acme;
  // Connections hand their sending to the kernel (files leave by sendfile)
  // where it has TLS (kernel_tls_available()) and the cipher agreed is one
  // it has.
  bool kernel_tls = true;
};

// Handshakes so far, how many resumed a session, and how many connections
// handed their sending to kernel TLS.
struct Stats {
  uint64_t handshakes = 0;
  uint64_t resumed = 0;
  uint64_t failed = 0;
  uint64_t kernel = 0;
};

class ServerContext final : public net::SecureContext {
 public:
  // Loads every certificate and key. Throws std::runtime_error naming the
  // file and what is wrong with it.
  explicit ServerContext(Settings settings);
  ~ServerContext() override;

  // New settings for the connections accepted from now on. Throws, keeping
  // the running ones, when they do not load.
  void update(Settings settings);

  std::unique_ptr<net::SecureLayer> new_layer() override;
  std::chrono::milliseconds handshake_timeout() const override;

  Stats stats() const;

  struct Snapshot;  // the loaded settings (server_context.cc)

 private:
  std::shared_ptr<Counters> counters_ = std::make_shared<Counters>();  // before current_
  mutable std::mutex mu_;
  std::shared_ptr<const Snapshot> current_;  // guarded by mu_
};

// What a site asks of its clients' certificates, as one text: the CAs'
// file, the revocation lists' file and the depth. A connection's
// certificate (net::PeerCertificate::demands) answers for the site a
// request is for only where the two texts are the same: a certificate
// verified against another site's CAs is not this one's.
std::string client_demands(const std::string& client_ca, const std::string& client_crl, int verify_depth);

// Problems with a certificate pair that do not stop it from loading: an
// expired certificate, or one not valid yet. One line each, for `tern -t`
// and the log.
std::vector<std::string> certificate_warnings(const CertificatePair& pair);

}  // namespace tern::tls
