#include "net/tcp_client.h"

#include <cerrno>

#include "base/log.h"
#include "net/connection_table.h"
#include "net/event_loop.h"
#include "net/sockets.h"
#include "net/tcp_connection.h"

namespace tern::net {

TcpClient::TcpClient(EventLoop* loop, const SocketAddress& server, TcpClientOptions options)
    : loop_(loop), options_(std::move(options)), connector_(loop, server, options_.connector) {
  connector_.set_connected_callback([this](Socket socket) { on_connected(std::move(socket)); });
  connector_.set_failed_callback([this](const Error& error, bool will_retry) {
    if (failed_cb_) failed_cb_(error, will_retry);
  });
  callbacks_.on_close = [this](TcpConnection& conn) { on_closed(conn); };
}

TcpClient::~TcpClient() {
  loop_->assert_in_loop_thread();
  wanted_ = false;
  connector_.stop();
  // Close now, while our callbacks still exist.
  loop_->connections().close_all(&callbacks_);
}

void TcpClient::connect() {
  loop_->assert_in_loop_thread();
  wanted_ = true;
  if (connection() == nullptr && !connector_.active()) connector_.start();
}

void TcpClient::disconnect() {
  loop_->assert_in_loop_thread();
  wanted_ = false;
  connector_.stop();
  if (TcpConnection* conn = connection()) conn->shutdown();
}

void TcpClient::stop() {
  loop_->assert_in_loop_thread();
  wanted_ = false;
  connector_.stop();
}

TcpConnection* TcpClient::connection() {
  loop_->assert_in_loop_thread();
  return connection_.valid() ? loop_->connections().find(connection_) : nullptr;
}

void TcpClient::on_connected(Socket socket) {
  // A Unix-domain peer has no IP address: the connection reports 0.0.0.0:0.
  const bool unix_socket = connector_.server().is_unix();
  if (options_.tcp_nodelay && !unix_socket) (void)sockets::set_tcp_nodelay(socket.fd(), true);
  InetAddress peer = unix_socket ? InetAddress() : sockets::peer_address(socket.fd());
  ConnectionTable& table = loop_->connections();
  std::unique_ptr<SecureLayer> layer;
  if (options_.secure && !(layer = options_.secure->new_layer())) {
    handshake_failure_ = "TLS handshake: no TLS session could be made";
    return connect_failed(Error{ENOMEM, "TLS handshake"});  // the Socket closes
  }
  if (!options_.preamble.empty()) {
    int saved_errno = 0;
    const ssize_t n = sockets::write(socket.fd(), options_.preamble.data(), options_.preamble.size(), &saved_errno);
    if (n != static_cast<ssize_t>(options_.preamble.size())) {
      return connect_failed(Error{n < 0 ? saved_errno : EAGAIN, "write"});  // the Socket closes
    }
  }
  TcpConnection* conn = table.open(std::move(socket), peer, &callbacks_, options_.trigger,
                                   /*accepted=*/false);
  connection_ = conn->id();
  ++connect_count_;
  if (layer) conn->use_secure_layer(std::move(layer), options_.secure->handshake_timeout(), /*client=*/true);
  table.establish(conn);
}

void TcpClient::connect_failed(const Error& error) {
  // Connected, but not usable: for the user, a connect that failed, retried
  // as one (ConnectorOptions: its back-off and max_attempts), whether or
  // not `reconnect` is set.
  if (wanted_) return connector_.connection_failed(error);  // it reports the failure
  if (failed_cb_) failed_cb_(error, false);
}

void TcpClient::on_closed(TcpConnection& conn) {
  if (conn.id() == connection_) connection_ = ConnectionId{};
  if (conn.secure_ && !conn.secure_->announced) {
    // Connected, but the handshake never ended.
    handshake_failure_ = conn.secure_handshake_failure();
    TERN_LOG_DEBUG("{}: {} to {}", options_.name, handshake_failure_, connector_.server().to_string());
    return connect_failed(Error{conn.secure_->timed_out ? ETIMEDOUT : EPROTO, "TLS handshake"});
  }
  if (wanted_ && options_.reconnect) {
    TERN_LOG_DEBUG("{}: connection to {} closed, reconnecting", options_.name,
                   connector_.server().to_string());
    connector_.start(options_.connector.initial_backoff);
  }
}

}  // namespace tern::net
