// OpenSslLayer: one connection's TLS (a net::SecureLayer made by
// ServerContext::new_layer, or ClientContext::new_layer for the client
// side). OpenSSL reads and writes through a BIO of ours over the
// connection's ciphertext buffers, so no socket is OpenSSL's and both I/O
// backends (epoll and io_uring) carry TLS alike.
//
// Server side: bytes that do not start a TLS record (plain HTTP sent to an
// HTTPS address) get a 400 page in plain text, which says so, and the
// connection closes.
//
// Kernel TLS (sending), where the context enables it (SSL_OP_ENABLE_KTLS)
// and the connection offers its socket during the handshake: when OpenSSL
// sets the keys for the application's data, the records made so far are
// written to the socket, and the kernel takes the keys (TCP_ULP "tls",
// TLS_TX); from then on the connection writes plaintext and files by
// sendfile, and the records OpenSSL still makes (tickets, alerts) come out
// in clear for the kernel to encrypt (net::SecureLayer::kernel_sends()).
// Receiving stays here. A cipher the kernel lacks, or a socket that cannot
// take the switch at once, keeps the connection on OpenSSL's own
// encryption. A TLS 1.3 key update of our sending side cannot follow the
// keys into the kernel: the connection fails rather than send under a key
// the peer no longer expects.
//
// Loop thread of its connection.
#pragma once

#include <openssl/bio.h>
#include <openssl/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "net/secure_layer.h"

namespace tern::tls {

// A context's counts of its sessions' handshakes.
struct Counters {
  std::atomic<uint64_t> handshakes{0};
  std::atomic<uint64_t> resumed{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> kernel{0};  // connections whose sending went to kernel TLS
};

// Whether this kernel has TLS for TCP sockets: asked once (a probe socket,
// which also loads the module where the process may), then remembered.
bool kernel_tls_available();

class OpenSslLayer final : public net::SecureLayer {
 public:
  enum class Role : uint8_t { kServer, kClient };
  // Owns `ssl`; `keep` holds what its context's callbacks use and outlives
  // `counters` (the context's), bumped as handshakes end.
  OpenSslLayer(SSL* ssl, std::shared_ptr<const void> keep, Counters* counters, Role role = Role::kServer);
  ~OpenSslLayer() override;
  OpenSslLayer(const OpenSslLayer&) = delete;
  OpenSslLayer& operator=(const OpenSslLayer&) = delete;

  Status start(net::Buffer& to_send) override;
  Status receive(net::Buffer& from_peer, net::Buffer& plain, net::Buffer& to_send) override;
  Status send(const char* data, size_t n, net::Buffer& to_send) override;
  void close(net::Buffer& to_send) override;
  bool established() const override { return established_; }
  // OpenSSL's read and write buffers (SSL_free_buffers), unless they hold
  // part of a record.
  void release_buffers() override;

  std::string_view protocol() const override;
  std::string_view cipher() const override;
  std::string_view server_name() const override;
  std::string_view application_protocol() const override;
  bool resumed() const override;
  std::string_view error() const override { return error_; }
  const net::PeerCertificate* peer_certificate() const override { return peer_.get(); }

  void offer_socket(int fd) override { socket_ = fd; }
  bool kernel_sends() const override { return kernel_sends_; }
  size_t take_written() override { return std::exchange(written_, 0); }

 private:
  static int bio_write(BIO* bio, const char* data, int length);
  static int bio_read(BIO* bio, char* data, int length);
  static long bio_ctrl(BIO* bio, int command, long number, void* pointer);
  static BIO_METHOD* bio_method();
  Status refuse_plain_http(net::Buffer& to_send);
  Status handshake(net::Buffer& to_send);
  Status failed(const char* what, net::Buffer& to_send);
  // BIO_CTRL_SET_KTLS for the sending side: true once the kernel has the keys.
  bool hand_to_kernel(const void* crypto_info);
  // A record made after the switch: in clear, with its header, for the kernel.
  bool append_clear_record(const char* data, size_t n);
  // peer_, where the server asked the client for its certificate.
  void note_peer_certificate();

  SSL* ssl_;
  std::shared_ptr<const void> keep_;
  Counters* counters_;
  net::Buffer* in_ = nullptr;   // ciphertext to read, during a call
  net::Buffer* out_ = nullptr;  // ciphertext written, during a call
  std::string error_;
  std::unique_ptr<net::PeerCertificate> peer_;
  bool established_ = false;
  bool first_bytes_checked_ = false;  // a client sends first: nothing to check
  bool broken_ = false;  // failed: its session is not to be resumed
  bool kernel_sends_ = false;
  uint8_t record_type_ = 0;  // of the next record written after the switch
  int socket_ = -1;          // offered for the switch; -1: not now
  size_t written_ = 0;       // written to socket_ at the switch
};

// The reason of OpenSSL's oldest queued error ("unknown error" if none),
// and the queue cleared: for the one line that says why a context could
// not be set up.
std::string openssl_reason();
// Throws std::runtime_error "<doing>: <openssl_reason()>".
[[noreturn]] void throw_openssl_error(std::string_view doing);

}  // namespace tern::tls
