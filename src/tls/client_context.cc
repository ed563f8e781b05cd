#include "tls/client_context.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <mutex>
#include <stdexcept>

#include "tls/openssl_layer.h"

namespace tern::tls {
namespace {

bool is_ip_literal(const std::string& name) {
  unsigned char address[16];
  return ::inet_pton(AF_INET, name.c_str(), address) == 1 || ::inet_pton(AF_INET6, name.c_str(), address) == 1;
}

}  // namespace

struct ClientContext::Shared {
  SSL_CTX* ctx = nullptr;
  Counters counters;
  std::mutex mu;
  SSL_SESSION* last = nullptr;  // guarded by mu: offered to the next connection

  Shared() = default;
  Shared(const Shared&) = delete;
  Shared& operator=(const Shared&) = delete;
  ~Shared() {
    if (last != nullptr) SSL_SESSION_free(last);
    if (ctx != nullptr) SSL_CTX_free(ctx);
  }

  // A session the server gave (after the handshake in TLS 1.3): kept as the
  // one to offer next.
  static int on_new_session(SSL* ssl, SSL_SESSION* session) {
    auto* self = static_cast<Shared*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
    std::lock_guard<std::mutex> lock(self->mu);
    if (self->last != nullptr) SSL_SESSION_free(self->last);
    self->last = session;
    return 1;  // the reference is ours
  }
};

ClientContext::ClientContext(ClientSettings settings)
    : settings_(std::move(settings)), name_is_ip_(is_ip_literal(settings_.name)), shared_(std::make_shared<Shared>()) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) throw std::runtime_error("OpenSSL: " + openssl_reason());
  shared_->ctx = ctx;
  SSL_CTX_set_app_data(ctx, shared_.get());
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  if (settings_.verify) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (settings_.ca.empty()) {
      if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        throw std::runtime_error("the system's CA store: " + openssl_reason());
      }
    } else if (SSL_CTX_load_verify_file(ctx, settings_.ca.c_str()) != 1) {
      throw std::runtime_error("CA file " + settings_.ca + ": " + openssl_reason());
    }
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }
  if (!settings_.client.cert.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, settings_.client.cert.c_str()) != 1) {
      throw std::runtime_error("certificate " + settings_.client.cert + ": " + openssl_reason());
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, settings_.client.key.c_str(), SSL_FILETYPE_PEM) != 1) {
      throw std::runtime_error("key " + settings_.client.key + ": " + openssl_reason());
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      throw std::runtime_error("key " + settings_.client.key + " does not match " + settings_.client.cert);
    }
  }
  // Sessions are kept by us (the last one), not in OpenSSL's cache.
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(ctx, &Shared::on_new_session);
}

ClientContext::~ClientContext() = default;

std::unique_ptr<net::SecureLayer> ClientContext::new_layer() {
  SSL* ssl = SSL_new(shared_->ctx);
  if (ssl == nullptr) {
    ERR_clear_error();
    return nullptr;
  }
  const std::string& name = settings_.name;
  bool named = true;
  if (!name.empty() && !name_is_ip_) {
    named = SSL_set_tlsext_host_name(ssl, name.c_str()) == 1 && (!settings_.verify || SSL_set1_host(ssl, name.c_str()) == 1);
  } else if (!name.empty() && settings_.verify) {
    named = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str()) == 1;
  }
  if (!named) {
    ERR_clear_error();
    SSL_free(ssl);
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (shared_->last != nullptr) SSL_set_session(ssl, shared_->last);
  }
  Counters& c = shared_->counters;
  return std::make_unique<OpenSslLayer>(ssl, shared_, &c, OpenSslLayer::Role::kClient);
}

Stats ClientContext::stats() const {
  const Counters& c = shared_->counters;
  return Stats{c.handshakes.load(std::memory_order_relaxed), c.resumed.load(std::memory_order_relaxed),
               c.failed.load(std::memory_order_relaxed)};
}

}  // namespace tern::tls
