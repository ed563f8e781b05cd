// Exchange: the handler's side, carried out by the HttpConnection that owns
// it (which is why it reaches into HttpConnection: it is a friend).
#include "http/exchange.h"

#include "base/assert.h"
#include "http/http_connection.h"
#include "net/connection_table.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"

namespace tern::http {

void Exchange::begin(HttpConnection* owner, const Request* request,
                     const ResponseWriter::Context& context, bool has_body, uint64_t serial) {
  owner_ = owner;
  serial_ = serial;
  request_ = request;
  writer_.emplace(context);
  active_ = true;
  body_complete_ = !has_body;
  body_paused_ = false;
}

void Exchange::end() {
  active_ = false;
  if (!body_handler_ && !drain_handler_ && !abort_handler_ && !job_ && !kept_) return;
  // What is running now may be one of these (finish() from inside the body
  // handler, or from a method of the job): they go after the round.
  owner_->conn_->loop()->defer([body = std::move(body_handler_), drain = std::move(drain_handler_),
                                abort = std::move(abort_handler_), job = job_.release(),
                                kept = std::move(kept_)] {
    delete job;
  });
  body_handler_ = nullptr;
  drain_handler_ = nullptr;
  abort_handler_ = nullptr;
}

ExchangeId Exchange::id() const { return {owner_->conn_->id(), serial_}; }

Exchange* Exchange::find(const ExchangeId& id) {
  if (id.connection.loop == nullptr) return nullptr;
  net::TcpConnection* conn = id.connection.loop->connections().find(id.connection);
  if (conn == nullptr || !conn->connected()) return nullptr;
  auto* http = std::any_cast<HttpConnection*>(&conn->context());
  if (http == nullptr || *http == nullptr) return nullptr;
  HttpConnection& owner = **http;
  if (!owner.exchange_active() || owner.exchange().serial_ != id.serial) return nullptr;
  return &owner.exchange();
}

void Exchange::deliver(std::string_view piece, bool last) {
  if (last) body_complete_ = true;
  if (body_handler_) body_handler_(piece, last);
}

ResponseWriter& Exchange::writer() {
  // Announce the close a finish() will make: the server started draining
  // since the exchange began, or the body is still coming and cannot be
  // read and dropped after the response.
  if (!writer_->started() && (owner_->shared_->draining ||
                              (!body_complete_ && !owner_->can_discard_body()))) {
    writer_->close_after();
  }
  return *writer_;
}

void Exchange::flush() { owner_->conn_->flush(); }

size_t Exchange::pending_output_bytes() const { return owner_->conn_->pending_output_bytes(); }

const net::TcpConnection& Exchange::connection() const { return *owner_->conn_; }

net::EventLoop* Exchange::loop() const { return owner_->conn_->loop(); }

void Exchange::pause_body() {
  if (body_complete_ || body_paused_) return;
  body_paused_ = true;
  owner_->conn_->stop_reading();
}

void Exchange::resume_body() {
  if (!body_paused_) return;
  body_paused_ = false;
  owner_->conn_->start_reading();
  if (!owner_->in_message_ && !owner_->conn_->input().empty()) owner_->resume_later();
}

void Exchange::wait_for_drain() { owner_->conn_->ask_write_complete(); }

void Exchange::finish() {
  TERN_CHECK_MSG(active_, "Exchange::finish without an exchange in progress");
  owner_->finish_exchange();
}

void Exchange::abort() {
  TERN_CHECK_MSG(active_, "Exchange::abort without an exchange in progress");
  owner_->abort_exchange();
}

}  // namespace tern::http
