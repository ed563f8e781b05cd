#include "net/tcp_client.h"

#include "base/log.h"
#include "net/connection_table.h"
#include "net/event_loop.h"
#include "net/sockets.h"
#include "net/tcp_connection.h"

namespace tern::net {

TcpClient::TcpClient(EventLoop* loop, const SocketAddress& server, TcpClientOptions options)
    : loop_(loop), options_(std::move(options)), connector_(loop, server, options_.connector) {
  connector_.set_connected_callback([this](Socket socket) { on_connected(std::move(socket)); });
  callbacks_.on_close = [this](TcpConnection& conn) { on_closed(conn); };
}

TcpClient::~TcpClient() {
  loop_->assert_in_loop_thread();
  wanted_ = false;
  connector_.stop();
  // Close now, while our callbacks still exist.
  loop_->connections().close_all(this);
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
  TcpConnection* conn = table.open(std::move(socket), peer, &callbacks_, this, options_.trigger,
                                   /*accepted=*/false);
  connection_ = conn->id();
  ++connect_count_;
  table.establish(conn);
}

void TcpClient::on_closed(TcpConnection& conn) {
  if (conn.id() == connection_) connection_ = ConnectionId{};
  if (wanted_ && options_.reconnect) {
    TERN_LOG_DEBUG("{}: connection to {} closed, reconnecting", options_.name,
                   connector_.server().to_string());
    connector_.start(options_.connector.initial_backoff);
  }
}

}  // namespace tern::net
