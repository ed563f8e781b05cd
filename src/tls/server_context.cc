#include "tls/server_context.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "base/log.h"
#include "tls/openssl_layer.h"

namespace tern::tls {
namespace {

int protocol_version(const std::string& name) {
  if (name == "TLSv1.2") return TLS1_2_VERSION;
  if (name == "TLSv1.3") return TLS1_3_VERSION;
  throw std::runtime_error("protocol \"" + name + "\" is not TLSv1.2 or TLSv1.3");
}

void check_key_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    throw std::runtime_error("key " + path + ": " + std::strerror(errno));
  }
  if ((st.st_mode & (S_IROTH | S_IWOTH)) != 0) {
    throw std::runtime_error("key " + path + ": readable or writable by every user (chmod o-rwx " + path + ")");
  }
}

// The ALPN list in its wire form: each name after its length.
std::vector<unsigned char> alpn_wire(const std::vector<std::string>& names) {
  std::vector<unsigned char> wire;
  for (const std::string& name : names) {
    if (name.empty() || name.size() > 255) throw std::runtime_error("ALPN name \"" + name + "\" has a bad length");
    wire.push_back(static_cast<unsigned char>(name.size()));
    wire.insert(wire.end(), name.begin(), name.end());
  }
  return wire;
}

}  // namespace

struct ServerContext::Snapshot {
  std::vector<SSL_CTX*> contexts;  // one per identity
  std::vector<Identity> identities;
  // Each context's client_demands() (empty: it asks for no certificate),
  // its app data; reserved whole before the contexts, so never moved.
  std::vector<std::string> demands;
  size_t default_identity = 0;
  std::function<std::optional<size_t>(std::string_view)> select;
  std::vector<unsigned char> alpn;
  std::shared_ptr<TicketKeys> tickets;
  std::shared_ptr<Counters> counters;
  std::chrono::milliseconds handshake_timeout{10000};
  std::shared_ptr<const AlpnChallenges> acme;

  Snapshot() = default;
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;
  ~Snapshot() {
    for (SSL_CTX* ctx : contexts) SSL_CTX_free(ctx);
  }
};

namespace {

using Snapshot = ServerContext::Snapshot;

// SNI: the identity for the name the client asked for, chosen as its
// ClientHello arrives, before OpenSSL looks at anything else in it: a
// session offered for resumption is then judged by the chosen site's
// context (a session made where no client certificate was asked, or where
// another CA's was, does not resume on a site that asks for its own).
// Ciphers and curves follow the identity; the protocol range stays the
// default identity's (the versions are settled before the name is known).
void choose_identity(SSL* ssl, const Snapshot* snapshot, std::string_view sent) {
  std::string name(sent);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!name.empty() && name.back() == '.') name.pop_back();
  const size_t chosen = snapshot->select(name).value_or(snapshot->default_identity);
  if (chosen == snapshot->default_identity || chosen >= snapshot->contexts.size()) return;
  SSL_CTX* ctx = snapshot->contexts[chosen];
  SSL_set_SSL_CTX(ssl, ctx);  // and its session id context, where the connection had the default's
  // The connection asks for a client certificate as the site's context
  // says (SSL_set_SSL_CTX leaves the connection's own settings).
  SSL_set_verify(ssl, SSL_CTX_get_verify_mode(ctx), SSL_CTX_get_verify_callback(ctx));
  SSL_set_verify_depth(ssl, SSL_CTX_get_verify_depth(ctx));
  // The connection was made with the default identity's policy: only what
  // differs is set again (parsing a cipher list costs a handshake's worth
  // of small allocations).
  const Identity& identity = snapshot->identities[chosen];
  const Identity& first = snapshot->identities[snapshot->default_identity];
  if (identity.ciphers != first.ciphers) SSL_set_cipher_list(ssl, identity.ciphers.c_str());
  if (identity.ciphersuites != first.ciphersuites) SSL_set_ciphersuites(ssl, identity.ciphersuites.c_str());
  if (identity.curves != first.curves) SSL_set1_groups_list(ssl, identity.curves.c_str());
  if (identity.prefer_server_ciphers != first.prefer_server_ciphers) {
    if (identity.prefer_server_ciphers) {
      SSL_set_options(ssl, SSL_OP_CIPHER_SERVER_PREFERENCE);
    } else {
      SSL_clear_options(ssl, SSL_OP_CIPHER_SERVER_PREFERENCE);
    }
  }
}

// The host name of a ClientHello's server_name extension (RFC 6066 3: a
// list of (type, name); host_name is type 0); empty if none or malformed
// (OpenSSL refuses a malformed one as it parses the extension).
std::string_view host_name(const unsigned char* data, size_t length) {
  if (length < 2) return {};
  size_t list = (size_t{data[0]} << 8) | data[1];
  if (list + 2 != length) return {};
  size_t at = 2;
  while (at + 3 <= length) {
    const unsigned char type = data[at];
    const size_t size = (size_t{data[at + 1]} << 8) | data[at + 2];
    at += 3;
    if (at + size > length) return {};
    if (type == TLSEXT_NAMETYPE_host_name) return {reinterpret_cast<const char*>(data + at), size};
    at += size;
  }
  return {};
}

// The ex_data slot that marks a connection answering a TLS-ALPN-01
// validation (on_client_hello sets it, on_alpn reads it).
int acme_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// Whether an ALPN list in its wire form (each name after its length)
// holds `name`; where, in *at.
bool alpn_offers(const unsigned char* list, size_t length, std::string_view name, const unsigned char** at) {
  size_t i = 0;
  while (i < length) {
    const size_t size = list[i];
    if (i + 1 + size > length) return false;
    if (std::string_view(reinterpret_cast<const char*>(list + i + 1), size) == name) {
      if (at != nullptr) *at = list + i;
      return true;
    }
    i += 1 + size;
  }
  return false;
}

// A CA's TLS-ALPN-01 validation for a name with a pending challenge: the
// challenge's certificate on the connection, and no site's.
bool answer_acme(SSL* ssl, const Snapshot* snapshot, std::string_view sent) {
  const unsigned char* extension = nullptr;
  size_t length = 0;
  if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &extension, &length) != 1 ||
      length < 2 || ((size_t{extension[0]} << 8) | extension[1]) + 2 != length ||
      !alpn_offers(extension + 2, length - 2, AlpnChallenges::kProtocol, nullptr)) {
    return false;
  }
  std::string name(sent);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!name.empty() && name.back() == '.') name.pop_back();
  if (!snapshot->acme->use(ssl, name)) return false;
  SSL_set_ex_data(ssl, acme_index(), const_cast<AlpnChallenges*>(snapshot->acme.get()));
  SSL_clear_options(ssl, SSL_OP_ENABLE_KTLS);
  return true;
}

int on_client_hello(SSL* ssl, int* /*alert*/, void* arg) {
  const auto* snapshot = static_cast<const Snapshot*>(arg);
  if (!snapshot->select && !snapshot->acme) return SSL_CLIENT_HELLO_SUCCESS;
  const unsigned char* extension = nullptr;
  size_t length = 0;
  if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &extension, &length) != 1) {
    return SSL_CLIENT_HELLO_SUCCESS;
  }
  const std::string_view name = host_name(extension, length);
  if (name.empty()) return SSL_CLIENT_HELLO_SUCCESS;
  if (snapshot->acme && answer_acme(ssl, snapshot, name)) return SSL_CLIENT_HELLO_SUCCESS;
  if (snapshot->select) choose_identity(ssl, snapshot, name);
  return SSL_CLIENT_HELLO_SUCCESS;
}

// The name was seen already (on_client_hello): acknowledged.
int on_server_name(SSL* /*ssl*/, int* /*alert*/, void* /*arg*/) { return SSL_TLSEXT_ERR_OK; }

// ALPN: the first of ours the client offers; none in common, no ALPN. A
// TLS-ALPN-01 validation (answer_acme): "acme-tls/1".
int on_alpn(SSL* ssl, const unsigned char** out, unsigned char* out_length, const unsigned char* offered,
            unsigned int offered_length, void* arg) {
  const auto* snapshot = static_cast<const Snapshot*>(arg);
  if (SSL_get_ex_data(ssl, acme_index()) != nullptr) {
    const unsigned char* at = nullptr;
    if (!alpn_offers(offered, offered_length, AlpnChallenges::kProtocol, &at)) return SSL_TLSEXT_ERR_ALERT_FATAL;
    *out = at + 1;
    *out_length = *at;
    return SSL_TLSEXT_ERR_OK;
  }
  if (snapshot->alpn.empty()) return SSL_TLSEXT_ERR_NOACK;
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, out_length, snapshot->alpn.data(),
                            static_cast<unsigned int>(snapshot->alpn.size()), offered,
                            offered_length) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

// A file's bytes ("" for none, or one that cannot be read: loading it
// says why).
std::string file_bytes(const std::string& path) {
  if (path.empty()) return {};
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Every certificate is accepted during the handshake; what verifying it
// found stays in the session (SSL_get_verify_result) for the layer.
int accept_for_now(int /*ok*/, X509_STORE_CTX* /*store*/) { return 1; }

void ask_for_client_certificates(SSL_CTX* ctx, const Identity& identity) {
  if (identity.client_ca.empty()) throw std::runtime_error("client_ca: needed to verify client certificates");
  if (SSL_CTX_load_verify_locations(ctx, identity.client_ca.c_str(), nullptr) != 1) {
    throw std::runtime_error("client_ca " + identity.client_ca + ": " + openssl_reason());
  }
  // The names of the CAs go in the certificate request: a browser offers
  // only certificates they issued.
  STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(identity.client_ca.c_str());
  if (names == nullptr) throw std::runtime_error("client_ca " + identity.client_ca + ": no certificate in it");
  SSL_CTX_set_client_CA_list(ctx, names);
  if (!identity.client_crl.empty()) {
    X509_STORE* store = SSL_CTX_get_cert_store(ctx);
    X509_LOOKUP* lookup = X509_STORE_add_lookup(store, X509_LOOKUP_file());
    if (lookup == nullptr || X509_load_crl_file(lookup, identity.client_crl.c_str(), X509_FILETYPE_PEM) <= 0) {
      throw std::runtime_error("client_crl " + identity.client_crl + ": " + openssl_reason());
    }
    X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL);
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, &accept_for_now);
  SSL_CTX_set_verify_depth(ctx, identity.verify_depth);
}

SSL_CTX* make_context(const Identity& identity, const Settings& settings, Snapshot* snapshot) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) throw std::runtime_error("OpenSSL: " + openssl_reason());
  snapshot->contexts.push_back(ctx);  // freed with the snapshot, even if what follows throws
  if (identity.pairs.empty()) throw std::runtime_error("no certificate");
  if (SSL_CTX_set_min_proto_version(ctx, protocol_version(identity.min_protocol)) != 1 ||
      SSL_CTX_set_max_proto_version(ctx, protocol_version(identity.max_protocol)) != 1) {
    throw std::runtime_error("protocols: " + openssl_reason());
  }
  if (protocol_version(identity.min_protocol) > protocol_version(identity.max_protocol)) {
    throw std::runtime_error("protocols: " + identity.min_protocol + " is above " + identity.max_protocol);
  }
  if (SSL_CTX_set_cipher_list(ctx, identity.ciphers.c_str()) != 1) {
    throw std::runtime_error("ciphers \"" + identity.ciphers + "\": " + openssl_reason());
  }
  if (SSL_CTX_set_ciphersuites(ctx, identity.ciphersuites.c_str()) != 1) {
    throw std::runtime_error("ciphersuites \"" + identity.ciphersuites + "\": " + openssl_reason());
  }
  if (SSL_CTX_set1_groups_list(ctx, identity.curves.c_str()) != 1) {
    throw std::runtime_error("curves \"" + identity.curves + "\": " + openssl_reason());
  }
  SSL_CTX_set_dh_auto(ctx, 1);
  uint64_t options = SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION;
  if (identity.prefer_server_ciphers) options |= SSL_OP_CIPHER_SERVER_PREFERENCE;
  if (!settings.tickets) options |= SSL_OP_NO_TICKET;
  if (settings.kernel_tls && kernel_tls_available()) options |= SSL_OP_ENABLE_KTLS;
  SSL_CTX_set_options(ctx, options);
  // No SSL_MODE_RELEASE_BUFFERS: it frees and allocates the record buffers
  // around every record; a quiet connection gives them back instead
  // (net::TcpConnection::secure_idle, OpenSslLayer::release_buffers).

  for (const CertificatePair& pair : identity.pairs) {
    if (SSL_CTX_use_certificate_chain_file(ctx, pair.cert.c_str()) != 1) {
      throw std::runtime_error("cert " + pair.cert + ": " + openssl_reason());
    }
    check_key_file(pair.key);
    if (SSL_CTX_use_PrivateKey_file(ctx, pair.key.c_str(), SSL_FILETYPE_PEM) != 1) {
      const std::string reason = openssl_reason();
      if (reason.find("mismatch") != std::string::npos) {
        throw std::runtime_error("key " + pair.key + " does not match the certificate " + pair.cert);
      }
      throw std::runtime_error("key " + pair.key + ": " + reason);
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      ERR_clear_error();
      throw std::runtime_error("key " + pair.key + " does not match the certificate " + pair.cert);
    }
  }

  std::string& demands = snapshot->demands.emplace_back();
  if (identity.verify_client != VerifyClient::kOff) {
    ask_for_client_certificates(ctx, identity);
    demands = client_demands(identity.client_ca, identity.client_crl, identity.verify_depth);
    SSL_CTX_set_app_data(ctx, &demands);  // for the layer's PeerCertificate
  }
  // A session resumes only where it was made under the same demands on the
  // client: one made on a site that asks for no certificate does not let a
  // client into a site that asks for one (SNI picks another context), and
  // one made before the CAs or the revocation lists changed (their bytes
  // count, not their names) is verified again.
  std::string session_context = "tern";
  if (identity.verify_client != VerifyClient::kOff) {
    const std::string all = demands + '\n' + std::to_string(static_cast<int>(identity.verify_client)) + '\n' +
                            file_bytes(identity.client_ca) + '\n' + file_bytes(identity.client_crl);
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(all.data()), all.size(), digest);
    session_context.assign(reinterpret_cast<const char*>(digest), SSL_MAX_SID_CTX_LENGTH);
  }
  SSL_CTX_set_session_id_context(ctx, reinterpret_cast<const unsigned char*>(session_context.data()),
                                 static_cast<unsigned int>(session_context.size()));
  if (settings.session_cache_entries > 0) {
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    SSL_CTX_sess_set_cache_size(ctx, static_cast<long>(settings.session_cache_entries));
  } else {
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  }
  SSL_CTX_set_timeout(ctx, static_cast<long>(settings.session_lifetime.count()));
  if (settings.tickets) {
    SSL_CTX_set_ex_data(ctx, TicketKeys::ex_index(), settings.tickets.get());
    SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, &TicketKeys::callback);
    // TLS 1.3: one ticket per handshake, not OpenSSL's two. A resumed
    // connection gets a fresh one, so a client always has one in hand;
    // each costs the server a copy, encoding and encryption of the session.
    SSL_CTX_set_num_tickets(ctx, 1);
  }
  SSL_CTX_set_client_hello_cb(ctx, &on_client_hello, snapshot);
  SSL_CTX_set_tlsext_servername_callback(ctx, &on_server_name);
  if (!snapshot->alpn.empty() || snapshot->acme) SSL_CTX_set_alpn_select_cb(ctx, &on_alpn, snapshot);
  return ctx;
}

std::shared_ptr<const Snapshot> load(Settings settings, std::shared_ptr<Counters> counters) {
  if (settings.identities.empty()) throw std::runtime_error("no certificate");
  if (settings.default_identity >= settings.identities.size()) throw std::runtime_error("no default certificate");
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->alpn = alpn_wire(settings.alpn);
  snapshot->acme = settings.acme;
  snapshot->demands.reserve(settings.identities.size());
  for (const Identity& identity : settings.identities) make_context(identity, settings, snapshot.get());
  snapshot->identities = settings.identities;
  snapshot->default_identity = settings.default_identity;
  snapshot->select = std::move(settings.select);
  snapshot->tickets = std::move(settings.tickets);
  snapshot->counters = std::move(counters);
  snapshot->handshake_timeout = settings.handshake_timeout;
  return snapshot;
}

}  // namespace

ServerContext::ServerContext(Settings settings) : current_(load(std::move(settings), counters_)) {}

ServerContext::~ServerContext() = default;

void ServerContext::update(Settings settings) {
  auto fresh = load(std::move(settings), counters_);
  std::lock_guard lock(mu_);
  current_ = std::move(fresh);
}

std::unique_ptr<net::SecureLayer> ServerContext::new_layer() {
  std::shared_ptr<const Snapshot> snapshot;
  {
    std::lock_guard lock(mu_);
    snapshot = current_;
  }
  SSL* ssl = SSL_new(snapshot->contexts[snapshot->default_identity]);
  if (ssl == nullptr) {
    TERN_LOG_ERROR("TLS: cannot make a session: {}", openssl_reason());
    return nullptr;
  }
  Counters* counters = snapshot->counters.get();
  return std::make_unique<OpenSslLayer>(ssl, std::shared_ptr<const void>(std::move(snapshot)), counters);
}

std::chrono::milliseconds ServerContext::handshake_timeout() const {
  std::lock_guard lock(mu_);
  return current_->handshake_timeout;
}

Stats ServerContext::stats() const {
  return Stats{counters_->handshakes.load(std::memory_order_relaxed),
               counters_->resumed.load(std::memory_order_relaxed),
               counters_->failed.load(std::memory_order_relaxed),
               counters_->kernel.load(std::memory_order_relaxed)};
}

std::string client_demands(const std::string& client_ca, const std::string& client_crl, int verify_depth) {
  return client_ca + '\n' + client_crl + '\n' + std::to_string(verify_depth);
}

std::vector<std::string> certificate_warnings(const CertificatePair& pair) {
  std::vector<std::string> warnings;
  FILE* file = std::fopen(pair.cert.c_str(), "r");
  if (file == nullptr) return warnings;  // loading it says why
  X509* cert = PEM_read_X509(file, nullptr, nullptr, nullptr);
  std::fclose(file);
  if (cert == nullptr) {
    ERR_clear_error();
    return warnings;
  }
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) {
    warnings.push_back("cert " + pair.cert + ": expired");
  } else if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
    warnings.push_back("cert " + pair.cert + ": not valid yet");
  }
  X509_free(cert);
  return warnings;
}

struct AlpnChallenges::Pair {
  X509* cert = nullptr;
  EVP_PKEY* key = nullptr;
  Pair() = default;
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
  ~Pair() {
    X509_free(cert);
    EVP_PKEY_free(key);
  }
};

AlpnChallenges::AlpnChallenges() = default;
AlpnChallenges::~AlpnChallenges() = default;

void AlpnChallenges::add(const std::string& name, std::string_view cert_pem, std::string_view key_pem) {
  auto pair = std::make_shared<Pair>();
  BIO* bio = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  pair->cert = bio != nullptr ? PEM_read_bio_X509(bio, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(bio);
  bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  pair->key = bio != nullptr ? PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(bio);
  if (pair->cert == nullptr || pair->key == nullptr) {
    throw std::runtime_error("TLS-ALPN-01 certificate for " + name + ": " + openssl_reason());
  }
  std::lock_guard lock(mu_);
  for (auto& [held, value] : pending_) {
    if (held == name) {
      value = std::move(pair);
      return;
    }
  }
  pending_.emplace_back(name, std::move(pair));
}

void AlpnChallenges::remove(std::string_view name) {
  std::lock_guard lock(mu_);
  std::erase_if(pending_, [&](const auto& entry) { return entry.first == name; });
}

bool AlpnChallenges::use(SSL* ssl, std::string_view name) const {
  std::shared_ptr<const Pair> pair;
  {
    std::lock_guard lock(mu_);
    for (const auto& [held, value] : pending_) {
      if (held == name) pair = value;
    }
  }
  if (pair == nullptr) return false;
  SSL_certs_clear(ssl);
  if (SSL_use_certificate(ssl, pair->cert) != 1 || SSL_use_PrivateKey(ssl, pair->key) != 1) {
    ERR_clear_error();
    return false;
  }
  return true;
}

}  // namespace tern::tls
