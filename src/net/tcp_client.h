// TcpClient: one outgoing connection, established by a Connector and, if
// asked, re-established after it closes.
//
//   TcpClientOptions options;
//   options.reconnect = true;
//   TcpClient client(&loop, server_addr, options);
//   client.set_message_callback([](TcpConnection& c, Buffer& in) { ... });
//   client.connect();
//
// Over TLS: options.secure (a tls::ClientContext) makes a layer for each
// connection; the connection callback runs once the handshake is over, and
// a handshake that fails (a certificate not verified, a timeout) is
// reported to the connect-failed callback, with handshake_failure() saying
// why, and retried, like a connect that failed (ConnectorOptions).
//
// Ownership: owned by the user; the connection lives in the loop's
// ConnectionTable (tagged with this client). Destroying the client closes the
// connection, running its close callbacks first. Loop thread only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "net/callbacks.h"
#include "net/connector.h"
#include "net/secure_layer.h"
#include "net/socket_address.h"

namespace tern::net {

class EventLoop;

// How a TcpClient connects.
struct TcpClientOptions {
  std::string name = "client";  // for log lines
  ConnectorOptions connector;   // timeouts and retries of each connect
  // Connect again (after initial back-off) when an established connection closes.
  bool reconnect = false;
  TriggerMode trigger = TriggerMode::kLevel;  // how the connection is watched
  bool tcp_nodelay = true;  // TCP_NODELAY on the connection (not on a Unix socket)
  // TLS (or another SecureLayer) over the connection; null: plain.
  std::shared_ptr<SecureContext> secure{};
  // Bytes written on the socket as it connects, before anything else and
  // outside TLS: a PROXY protocol header. At most a few KiB (a fresh
  // socket takes them at once; one that does not fails the connect).
  std::string preamble{};
};

class TcpClient {
 public:
  // A client of `server` on `loop`; nothing happens until connect().
  TcpClient(EventLoop* loop, const SocketAddress& server, TcpClientOptions options = {});
  // Stops connecting and closes the connection now, running its close
  // callbacks. Loop thread only.
  ~TcpClient();

  TcpClient(const TcpClient&) = delete;
  TcpClient& operator=(const TcpClient&) = delete;

  // The connection's callbacks, as TcpServer's (callbacks.h); set before connect().
  void set_connection_callback(std::function<void(TcpConnection&)> cb) {
    callbacks_.on_connection = std::move(cb);
  }
  void set_message_callback(std::function<void(TcpConnection&, Buffer&)> cb) {
    callbacks_.on_message = std::move(cb);
  }
  // only_when_asked: see TcpServer::set_write_complete_callback.
  void set_write_complete_callback(std::function<void(TcpConnection&)> cb,
                                   bool only_when_asked = false) {
    callbacks_.on_write_complete = std::move(cb);
    callbacks_.write_complete_when_asked = only_when_asked;
  }
  // A connect that failed, or a TLS handshake (then Error::what is "TLS
  // handshake" and handshake_failure() says more), or a preamble the socket
  // did not take (Error::what "write"): each retried as ConnectorOptions say.
  void set_connect_failed_callback(Connector::FailedCallback cb) { failed_cb_ = std::move(cb); }

  // Starts connecting (and retrying, as the options say).
  void connect();
  // Stops reconnecting and half-closes the connection after its output
  // drains: it closes when the peer ends its side.
  void disconnect();
  // Stops connecting: the attempt in progress, and any retry or reconnect
  // to come. An established connection stays open (disconnect() closes
  // it); connect() starts again.
  void stop();

  // The live connection, or nullptr.
  TcpConnection* connection();
  const SocketAddress& server() const { return connector_.server(); }  // what it connects to
  int connect_count() const { return connect_count_; }  // connections made so far
  // Why the last TLS handshake that failed did ("TLS handshake: certificate
  // verify failed: ..."); empty if none has.
  const std::string& handshake_failure() const { return handshake_failure_; }

 private:
  void on_connected(Socket socket);
  void on_closed(TcpConnection& conn);
  void connect_failed(const Error& error);

  EventLoop* const loop_;
  const TcpClientOptions options_;
  ConnectionCallbacks callbacks_;
  Connector connector_;
  ConnectionId connection_;
  Connector::FailedCallback failed_cb_;
  std::string handshake_failure_;
  bool wanted_ = false;  // connect() called, disconnect() and stop() not since
  int connect_count_ = 0;
};

}  // namespace tern::net
