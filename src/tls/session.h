// Session: one connection's TLS (a net::SecureLayer made by
// ServerContext::new_layer, or ClientContext::new_layer for the client
// side). OpenSSL reads and writes through a BIO of ours over the
// connection's ciphertext buffers, so no socket is OpenSSL's and both I/O
// backends (epoll and io_uring) carry TLS alike.
//
// Server side: bytes that do not start a TLS record (plain HTTP sent to an
// HTTPS address) get a 400 page in plain text, which says so, and the
// connection closes.
//
// Loop thread of its connection.
#pragma once

#include <openssl/bio.h>
#include <openssl/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "net/secure_layer.h"

namespace tern::tls {

class Session final : public net::SecureLayer {
 public:
  enum class Role : uint8_t { kServer, kClient };
  // Owns `ssl`; `keep` holds what its context's callbacks use; the counters
  // (of the context) are bumped once the handshake ends.
  Session(SSL* ssl, std::shared_ptr<const void> keep, std::atomic<uint64_t>* handshakes,
          std::atomic<uint64_t>* resumed, std::atomic<uint64_t>* failed, Role role = Role::kServer);
  ~Session() override;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Status start(net::Buffer& to_send) override;
  Status receive(net::Buffer& from_peer, net::Buffer& plain, net::Buffer& to_send) override;
  Status send(const char* data, size_t n, net::Buffer& to_send) override;
  void close(net::Buffer& to_send) override;
  bool established() const override { return established_; }

  std::string_view protocol() const override;
  std::string_view cipher() const override;
  std::string_view server_name() const override;
  std::string_view application_protocol() const override;
  bool resumed() const override;
  std::string_view error() const override { return error_; }

 private:
  static int bio_write(BIO* bio, const char* data, int length);
  static int bio_read(BIO* bio, char* data, int length);
  static long bio_ctrl(BIO* bio, int command, long number, void* pointer);
  static BIO_METHOD* bio_method();
  Status refuse_plain_http(net::Buffer& to_send);
  Status handshake(net::Buffer& to_send);
  Status failed(const char* what, net::Buffer& to_send);

  SSL* ssl_;
  std::shared_ptr<const void> keep_;
  std::atomic<uint64_t>* handshakes_;
  std::atomic<uint64_t>* resumed_;
  std::atomic<uint64_t>* failed_;
  net::Buffer* in_ = nullptr;   // ciphertext to read, during a call
  net::Buffer* out_ = nullptr;  // ciphertext written, during a call
  std::string error_;
  bool established_ = false;
  bool first_bytes_checked_ = false;  // a client sends first: nothing to check
  bool broken_ = false;  // failed: its session is not to be resumed
};

// The reason of OpenSSL's oldest queued error ("unknown error" if none),
// and the queue cleared: for the one line that says why a context could
// not be set up.
std::string openssl_reason();

}  // namespace tern::tls
