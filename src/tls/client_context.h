// ClientContext: TLS for the connections a client opens to one server, on
// OpenSSL 3 (a net::SecureContext; give it to TcpClientOptions::secure or
// ConnectionPoolOptions::secure).
//
//   tls::ClientSettings settings;
//   settings.name = "api.internal";       // SNI, and the name to verify
//   settings.ca = "/etc/tern/upstream-ca.pem";
//   auto context = std::make_shared<tls::ClientContext>(settings);
//
// TLS 1.2 and 1.3. The server's certificate is verified by default: its
// chain against the CA file (the system's store without one) and its name
// against `name` (a DNS name, sent as SNI too; an IP address is matched
// against the certificate's IP entries and sent as no SNI). A client
// certificate may be presented. The last session the server gave is offered
// to the next connection, so a pool's new connections resume instead of
// doing a full handshake.
//
// Thread-safe: layers are made on any loop.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "net/secure_layer.h"
#include "tls/server_context.h"

namespace tern::tls {

struct ClientSettings {
  std::string name;            // empty: no SNI and no name checked
  bool verify = true;          // the server's certificate chain and name
  std::string ca;              // PEM file of trusted CAs; empty: the system's
  CertificatePair client;      // a client certificate; cert empty: none
  std::chrono::milliseconds handshake_timeout{10000};
  bool operator==(const ClientSettings&) const = default;
};

class ClientContext final : public net::SecureContext {
 public:
  // Loads the CA file and the client certificate. Throws std::runtime_error
  // naming the file and what is wrong with it.
  explicit ClientContext(ClientSettings settings);
  ~ClientContext() override;
  ClientContext(const ClientContext&) = delete;
  ClientContext& operator=(const ClientContext&) = delete;

  std::unique_ptr<net::SecureLayer> new_layer() override;
  std::chrono::milliseconds handshake_timeout() const override { return settings_.handshake_timeout; }

  const ClientSettings& settings() const { return settings_; }
  // Handshakes so far, how many resumed a session, how many failed.
  Stats stats() const;

  struct Shared;  // what the sessions share with the context (client_context.cc)

 private:
  const ClientSettings settings_;
  bool name_is_ip_ = false;
  std::shared_ptr<Shared> shared_;
};

}  // namespace tern::tls
