// TcpConnection's relayed start: the PROXY protocol header a load balancer
// sends before anything else (net/proxy_protocol.h). Until it is read the
// connection is not announced; its bytes gather in input_ (never more than
// kMaxProxyHeader of them waiting: the parser refuses a longer start), and
// once it is read what came after it goes on as the connection's first
// bytes, through the TLS layer if there is one. See tcp_connection.h.
#include "base/log.h"
#include "net/buffer_pool.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"

namespace tern::net {

TcpConnection::ClientState& TcpConnection::client_state() {
  if (!client_) client_ = std::make_unique<ClientState>(this);
  return *client_;
}

void TcpConnection::expect_proxy_header(const ProxyProtocolOptions* options,
                                        const std::function<bool(const InetAddress&)>* admit,
                                        std::shared_ptr<ConnectionGate> gate) {
  TERN_DCHECK(state_ == State::kConnected && (!client_ || !client_->relayed));
  ClientState& client = client_state();
  client.relayed = true;
  client.admit = admit;
  client.gate = std::move(gate);
  awaiting_proxy_header_ = true;
  client.timer.arm(options->timeout);
}

void TcpConnection::proxy_timer_fired(void* self) {
  auto* conn = static_cast<TcpConnection*>(self);
  if (conn->disconnected() || !conn->awaiting_proxy_header_) return;
  TERN_LOG_DEBUG("conn {} {}: no PROXY protocol header in time, closing", conn->slot_, conn->peer_.to_ip_port());
  conn->force_close();
}

void TcpConnection::proxy_input() {
  const ProxyParseResult r = parse_proxy_header({input_.peek(), input_.readable_bytes()});
  if (r.status == ProxyParse::kIncomplete) return;
  if (r.status == ProxyParse::kInvalid) {
    // A load balancer that sends no header (or a client that reached the
    // address past it) is a configuration to fix: said once a second.
    TERN_LOG_EVERY_SECOND(spdlog::level::warn, "conn {} {}: PROXY protocol: {}; closing", slot_,
                          peer_.to_ip_port(), r.error);
    input_.retrieve_all();
    loop()->buffers().drain(input_);
    return close_at_round_end();
  }
  input_.retrieve(r.size);
  client_->header = r.header;
  client_->timer.cancel();
  // A LOCAL header (the balancer's own health check) names no client.
  if (!r.header.local && ((client_->admit != nullptr && !(*client_->admit)(r.header.source)) ||
                          (client_->gate && !client_->gate->enter(r.header.source)))) {
    TERN_LOG_DEBUG("conn {} {}: refused the client {} its PROXY header names", slot_, peer_.to_ip_port(),
                   r.header.source.to_ip());
    loop()->load().shed.add();
    input_.retrieve_all();
    loop()->buffers().drain(input_);
    return close_at_round_end();
  }
  // The gate is the one entered by, or none.
  if (r.header.local) client_->gate.reset();
  // Only now: a connection refused above was never announced, and its
  // close must not be either.
  awaiting_proxy_header_ = false;
  proxy_header_read();
}

void TcpConnection::proxy_header_read() {
  if (callbacks_->on_connection) callbacks_->on_connection(*this);
  if (disconnected() || close_scheduled_) return;
  if (input_.empty()) return loop()->buffers().drain(input_);
  if (secure_) {
    // What followed the header is the TLS layer's: the ClientHello.
    loop()->buffers().fill(secure_->in);
    secure_->in.append(input_.peek(), input_.readable_bytes());
    input_.retrieve_all();
    loop()->buffers().drain(input_);
    return secure_input();
  }
  if (reading_) return deliver_input();
  received_while_paused_ = true;  // start_reading() hands it over
}

}  // namespace tern::net
