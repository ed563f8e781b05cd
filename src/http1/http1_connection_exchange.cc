// Http1Connection as an Exchange's transport: beginning and ending the
// exchange that a handler took a request as, and what the exchange asks of
// the connection (ExchangeTransport).
#include "http1/http1_connection.h"

#include "base/log.h"
#include "net/buffer.h"
#include "net/connection_table.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"

namespace tern::http {

void Http1Connection::begin_exchange(net::Buffer& input) {
  Request& request = req_->request;
  detach_head(input);
  const bool has_body = request.has_body();
  const bool keep_alive = request.keep_alive() && !shared_->draining;
  state_ = has_body ? State::kStreamBody : State::kAwait;
  arm_timer(has_body ? shared_->limits->body_timeout : shared_->limits->send_timeout);
  exchange().begin(this, &request, writer_context(keep_alive), has_body);
  if (req_->dispatch.claim == Claim::kExchange) {
    req_->dispatch.handler->start(req_->route, exchange());
  } else {
    req_->dispatch.handler->respond(req_->route, exchange().writer());
    exchange().finish();
  }
  // It may have answered already (finish() ran), or be waiting. A body
  // held (a guard deciding, a limit's turn) is not asked for yet: the
  // client may still be answered 401 or 429 without sending it, and hears
  // 100 Continue once it is let through (resume_body).
  if (exchange_active() && !exchange().body_paused() && wants_continue(input)) send_continue();
}

bool Http1Connection::wants_continue(const net::Buffer& input) const {
  return state_ == State::kStreamBody && req_->request.expect_continue() && !continue_sent_ && input.empty();
}

void Http1Connection::finish_exchange() {
  if (state_ == State::kTunnel) return abort_exchange();  // a tunnel ends with its connection
  ResponseWriter& writer = exchange().response();
  if (!writer.finished()) {
    TERN_LOG_ERROR("conn {}: exchange for {} {} finished without a complete response (request {})",
                   conn_->id().slot, req_->request.method_text(), req_->request.target(), req_->request.id());
    if (!writer.started()) {
      writer.close_after();
      write_error_page(writer, 500);
    } else {
      conn_->force_close();
    }
  }
  if (shared_->on_response) shared_->on_response(req_->request, *conn_, writer);
  const bool body_left = state_ == State::kStreamBody;
  const bool keep_alive = writer.keep_alive() && !writer.stream_short() && !shared_->draining;
  exchange().end();
  if (!conn_->is_reading() && conn_->connected()) conn_->start_reading();
  if (body_left && keep_alive) {
    // Answered before the body was in: drop the rest, then go on.
    state_ = State::kDiscard;
    arm_timer(shared_->limits->body_timeout);
  } else {
    next_request(keep_alive, body_left);
  }
  conn_->flush();
  // Requests (or body bytes) that arrived meanwhile: go on with them, but
  // not from inside the caller (an upstream's callback, say).
  if ((state_ == State::kHead || state_ == State::kDiscard) && !conn_->input().empty() &&
      !in_message_) {
    resume_later();
  }
}

void Http1Connection::resume_later() {
  // This object may be reused for another connection before the deferred
  // call runs: find ours by its generation-checked id.
  const net::ConnectionId id = conn_->id();
  conn_->loop()->defer([id] {
    net::TcpConnection* conn = id.loop->connections().find(id);
    if (conn == nullptr || !conn->connected()) return;
    auto* http = std::any_cast<HttpConnection*>(&conn->context());
    if (http != nullptr && *http != nullptr) (*http)->on_message(conn->input());
  });
}

bool Http1Connection::switch_protocols() {
  if (state_ != State::kAwait || !exchange().response().finished() || !exchange().response().keep_alive()) {
    return false;
  }
  state_ = State::kTunnel;
  conn_->flush();
  // Bytes the client sent right behind its request are the new protocol's.
  if (!conn_->is_reading() && conn_->connected()) conn_->start_reading();
  if (!conn_->input().empty() && !in_message_) resume_later();
  arm_timer(shared_->limits->send_timeout);
  return true;
}

void Http1Connection::write_raw(std::string_view bytes) {
  if (!bytes.empty()) conn_->output_tail_buffer().append(bytes);
}

void Http1Connection::abort_exchange() {
  if (shared_->on_response) shared_->on_response(req_->request, *conn_, exchange().response());
  const bool body_left = state_ == State::kStreamBody || state_ == State::kTunnel;
  exchange().end();
  // What the response got so far goes out, then the close tells the client
  // it is incomplete.
  start_closing(body_left);
}

void Http1Connection::fail_exchange(int status, std::string_view log_reason) {
  const bool started = exchange().response().started();
  // A response under way is logged as it stands; one not begun is
  // answered `status` and logged by fail().
  if (started && shared_->on_response) shared_->on_response(req_->request, *conn_, exchange().response());
  exchange().cancel();
  if (!started) return fail(status, log_reason, true);
  TERN_LOG_DEBUG("conn {}: {} after the response started: closing", conn_->id().slot, log_reason);
  start_closing(true);
}

net::EventLoop* Http1Connection::loop() const { return conn_->loop(); }

const net::InetAddress& Http1Connection::peer_address() const { return conn_->peer_address(); }
const net::InetAddress& Http1Connection::connection_client() const { return conn_->client_address(); }

const net::InetAddress& Http1Connection::local_address() const { return conn_->local_address(); }

const net::SecureLayer* Http1Connection::secure() const { return conn_->secure_layer(); }

bool Http1Connection::must_close() const {
  return shared_->draining || (!req_->exchange.body_complete() && !can_discard_body());
}

void Http1Connection::flush() { conn_->flush(); }

size_t Http1Connection::pending_output_bytes() const { return conn_->pending_output_bytes(); }

void Http1Connection::pause_body() { conn_->stop_reading(); }

void Http1Connection::resume_body() {
  conn_->start_reading();
  if (wants_continue(conn_->input())) send_continue();
  if (!in_message_ && !conn_->input().empty()) resume_later();
}

void Http1Connection::wait_for_drain() { conn_->ask_write_complete(); }

}  // namespace tern::http
