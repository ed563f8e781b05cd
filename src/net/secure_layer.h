// SecureLayer: what a connection's bytes pass through between its socket and
// the protocol above, for a transport that encrypts (TLS: tls/tls_session.h).
//
// A TcpConnection with a layer keeps two more buffers, the ciphertext it
// received and the ciphertext it is to send; the layer turns the first into
// plaintext input and queued plaintext output into the second. Everything
// else of the connection (its input and output queues, file regions, the
// callbacks, both I/O backends) is as for a plain one: a protocol never knows
// whether its bytes are encrypted, beyond asking secure().
//
// The library holds no cryptography of its own: a SecureContext, made by the
// application, makes a layer for each connection: tls::ServerContext (TLS
// on OpenSSL), given to a TcpServer for a listening address, for each
// connection accepted there; tls::ClientContext, given to a TcpClient
// (TcpClientOptions::secure), for each connection it opens. A client's
// connection is announced (on_connection) once its handshake is over; one
// whose handshake fails is reported as a failed connect.
//
// A layer is used on its connection's loop thread only; a context may be
// asked for layers by several loops at once.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "net/buffer.h"

namespace tern::net {

// The certificate a client presented, where the server asked for one
// (mutual TLS), as nginx's $ssl_client_* variables give it.
struct PeerCertificate {
  // "SUCCESS", "FAILED:" and the reason, or "NONE" (no certificate sent).
  std::string verify = "NONE";
  std::string subject;      // RFC 2253 ("CN=alice,O=Example"); empty without one
  std::string issuer;       // the same, of its issuer
  std::string serial;       // in hex
  std::string fingerprint;  // SHA-1 of the certificate, in lower-case hex
  // What the server asked of it: its context's text of what it verifies
  // against (tls::client_demands), for a request to be matched with the
  // site it is for.
  std::string demands;
  bool verified() const { return verify == "SUCCESS"; }  // sent and verified
  bool sent() const { return verify != "NONE"; }         // the client sent one
};

class SecureLayer {
 public:
  // What a call into the layer leaves the connection to do.
  enum class Status : uint8_t {
    kOk,          // go on
    kPeerClosed,  // the peer closed its side cleanly (TLS close_notify)
    kFinish,      // send what is in `to_send` (an alert, a refusal), then close
    kFailed,      // the stream cannot be trusted: close now
  };

  virtual ~SecureLayer() = default;

  // The client side speaks first: its opening records (a ClientHello) are
  // appended to `to_send`. A server's layer has nothing to say.
  virtual Status start(Buffer& /*to_send*/) { return Status::kOk; }
  // Ciphertext from the peer, consumed as far as it goes: plaintext is
  // appended to `plain`, records to send back (the handshake's) to `to_send`.
  virtual Status receive(Buffer& from_peer, Buffer& plain, Buffer& to_send) = 0;
  // Plaintext to send, all of it, as records appended to `to_send`. Only
  // once established().
  virtual Status send(const char* data, size_t n, Buffer& to_send) = 0;
  // The closing alert (TLS close_notify), appended to `to_send`.
  virtual void close(Buffer& to_send) = 0;
  // The handshake is over: plaintext flows both ways.
  virtual bool established() const = 0;
  // The connection is quiet: memory kept for records in flight goes back
  // (taken again for the next record). Anything the layer still holds, it
  // keeps.
  virtual void release_buffers() {}

  // For logs and applications (CGI variables): "TLSv1.3", the cipher's
  // name, the server name the client asked for (SNI; empty without), the
  // application protocol agreed (ALPN; empty without), and whether the
  // session was resumed. Meaningful once established().
  virtual std::string_view protocol() const = 0;
  virtual std::string_view cipher() const = 0;
  virtual std::string_view server_name() const = 0;
  virtual std::string_view application_protocol() const = 0;
  virtual bool resumed() const = 0;
  // Why the layer failed ("certificate verify failed: ..."), for logs;
  // empty while it has not.
  virtual std::string_view error() const { return {}; }
  // What the client's certificate was found to be, once established(); null
  // where the server did not ask for one.
  virtual const PeerCertificate* peer_certificate() const { return nullptr; }

  // Kernel TLS (sending). Before each step of the handshake the connection
  // offers its socket (-1 while it cannot write to it at once: a send is in
  // flight); a layer that can may then write the handshake's last records
  // itself and give the kernel the keys. From then on kernel_sends(): the
  // connection writes plaintext to the socket (files by sendfile), and what
  // the layer appends to `to_send` are records in clear, each a 5-byte TLS
  // header and its content, that the connection hands to the kernel with
  // their type.
  virtual void offer_socket(int /*fd*/) {}
  virtual bool kernel_sends() const { return false; }
  // Bytes the layer wrote to the socket itself, counted once.
  virtual size_t take_written() { return 0; }
};

// Makes the layer of each connection accepted on an address
// (TcpServer::set_secure_context), or made by a client (TcpClientOptions::secure).
class SecureContext {
 public:
  virtual ~SecureContext() = default;
  // A layer for a new connection: the server side for a server's context,
  // the client side for a client's. Thread-safe.
  virtual std::unique_ptr<SecureLayer> new_layer() = 0;
  // A connection still without an established layer this long after it was
  // accepted (or connected) is closed.
  virtual std::chrono::milliseconds handshake_timeout() const = 0;
};

}  // namespace tern::net
