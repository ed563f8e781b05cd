#include "http/http_connection.h"

#include <algorithm>
#include <any>
#include <string>

#include "base/log.h"
#include "http/status.h"
#include "net/buffer.h"
#include "net/connection_table.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"

namespace tern::http {

void write_error_page(ResponseWriter& writer, int status, std::string_view allow) {
  std::string_view reason = reason_phrase(status);
  // Small enough to build on the stack; error paths may allocate anyway.
  std::string page;
  page.reserve(160);
  page += "<!DOCTYPE html>\n<html><head><title>";
  page += std::to_string(status);
  page += ' ';
  page += reason;
  page += "</title></head>\n<body><h1>";
  page += std::to_string(status);
  page += ' ';
  page += reason;
  page += "</h1></body></html>\n";
  // After these nginx stops reusing the connection, and so do we: the
  // request was malformed or the server is in trouble.
  if (status == 400 || status == 413 || status == 414 || status == 500 || status == 501) {
    writer.close_after();
  }
  writer.start(status).header("Content-Type", "text/html; charset=utf-8");
  if (!allow.empty()) writer.header("Allow", allow);
  writer.body(page);
}

RequestState* RequestStatePool::acquire() {
  if (free_.empty()) {
    owned_.push_back(std::make_unique<RequestState>());
    return owned_.back().get();
  }
  RequestState* state = free_.back();
  free_.pop_back();
  return state;
}

void RequestStatePool::release(RequestState* state) { free_.push_back(state); }

void HttpConnection::attach(net::TcpConnection* conn) {
  conn_ = conn;
  req_ = nullptr;
  state_ = State::kHead;
  request_started_ = continue_sent_ = head_timer_armed_ = false;
  body_consumed_ = 0;
  arm_timer(shared_->limits->keepalive_timeout);
}

void HttpConnection::on_close() {
  timeout_.cancel();
  if (exchange_active()) {
    // The client went away first: tell the handler, which lets go of it.
    auto abort_handler = std::move(exchange().abort_handler_);
    exchange().end();
    if (abort_handler) abort_handler();
  }
  end_request();
  conn_ = nullptr;
}

void HttpConnection::on_write_complete() {
  if (!exchange_active() || !exchange().drain_handler_) return;
  auto handler = exchange().drain_handler_;  // it may set another
  handler();
}

void HttpConnection::begin_request() {
  if (req_ != nullptr) return;
  req_ = shared_->states->acquire();
  req_->parser.set_limits(shared_->limits->parser);
  req_->parser.reset();
  req_->chunked_body.clear();
}

void HttpConnection::end_request() {
  if (req_ == nullptr) return;
  shared_->states->release(req_);
  req_ = nullptr;
}

void HttpConnection::on_message(net::Buffer& input) {
  in_message_ = true;
  for (bool more = true; more;) {
    switch (state_) {
      case State::kHead:
        more = !input.empty() && parse_head(input);
        if (more && !(shared_->exchange_for && begin_exchange(input)) && state_ == State::kHead) {
          dispatch(input);
        }
        break;
      case State::kBody:
        more = !input.empty() && read_body(input);
        if (more) dispatch(input);
        break;
      case State::kStreamBody:
        more = stream_body(input);
        break;
      case State::kAwait:
      case State::kClosing:
        more = false;
        break;
    }
  }
  in_message_ = false;
  if (state_ == State::kClosing) {
    input.retrieve_all();  // lingering: discard
  } else if (state_ == State::kAwait && input.readable_bytes() > shared_->limits->parser.max_head_bytes) {
    // Pipelined requests pile up behind an exchange: let the kernel hold them.
    conn_->stop_reading();
  }
  conn_->flush();
}

bool HttpConnection::parse_head(net::Buffer& input) {
  if (!request_started_) {
    request_started_ = true;
    begin_request();
  }
  const Request& request = req_->request;
  switch (req_->parser.parse(input.view(), &req_->request)) {
    case ParseStatus::kNeedMore:
      // The rest of the head has header_timeout from here (armed once per
      // request). A head that arrives whole never needs the timer, so a
      // keep-alive request leaves the connection's timer as it was.
      if (!head_timer_armed_) {
        head_timer_armed_ = true;
        arm_timer(shared_->limits->header_timeout);
      }
      return false;
    case ParseStatus::kError:
      fail(req_->parser.error_status(), req_->parser.error_reason());
      return false;
    case ParseStatus::kComplete:
      break;
  }
  const HttpLimits& limits = *shared_->limits;
  if (request.body_framing() == BodyFraming::kContentLength &&
      request.content_length() > limits.max_body_bytes) {
    fail(413, "Content-Length over the body limit");
    return false;
  }
  if (request.body_framing() == BodyFraming::kNone) return true;
  // A Router handler gets the whole body; an Exchange takes this over.
  state_ = State::kBody;
  body_consumed_ = 0;
  continue_sent_ = false;
  req_->chunked_body.clear();
  req_->chunked = ChunkedDecoder(ChunkedDecoder::Limits{limits.max_body_bytes, 4096, 8192});
  arm_timer(limits.body_timeout);
  return true;
}

bool HttpConnection::read_body(net::Buffer& input) {
  // The head stays in the buffer until the request is answered, so the
  // parsed views may be re-derived if the buffer moves as the body arrives.
  Request& request = req_->request;
  const size_t head = request.head_size();
  std::string_view after_head = input.view().substr(head);
  bool complete = false;
  if (request.body_framing() == BodyFraming::kContentLength) {
    complete = after_head.size() >= request.content_length();
    body_consumed_ = complete ? request.content_length() : 0;
  } else {
    for (;;) {
      size_t used = 0;
      std::string_view data;
      auto status = req_->chunked.next(after_head.substr(body_consumed_), &used, &data);
      body_consumed_ += used;
      if (status == ChunkedDecoder::kData) {
        req_->chunked_body.append(data);
        continue;
      }
      if (status == ChunkedDecoder::kError) {
        fail(req_->chunked.error_status(), req_->chunked.error_reason());
        return false;
      }
      complete = status == ChunkedDecoder::kDone;
      break;
    }
  }
  if (!complete) {
    if (request.expect_continue() && !continue_sent_) send_continue();
    return false;
  }
  // Views into the buffer may be stale after it grew: parse the head again.
  req_->parser.reset();
  req_->parser.parse(input.view(), &request);
  request.body_ = request.body_framing() == BodyFraming::kChunked
                      ? std::string_view(req_->chunked_body)
                      : input.view().substr(head, request.content_length());
  return true;
}

void HttpConnection::send_continue() {
  // RFC 9110 10.1.1: tell the client to go on sending the body it announced.
  continue_sent_ = true;
  if (req_->request.version() != Version::kHttp11) return;
  conn_->output_tail_buffer().append("HTTP/1.1 100 Continue\r\n\r\n");
  conn_->flush();
}

void HttpConnection::dispatch(net::Buffer& input) {
  Request& request = req_->request;
  const bool keep_alive = request.keep_alive() && !shared_->draining;
  ResponseWriter writer(writer_context(keep_alive));
  if (request.method() == Method::kOther) {
    write_error_page(writer, 501);
  } else {
    shared_->dispatch(request, writer);
  }
  if (!writer.finished()) {
    // A handler bug. Before any byte we can still answer; after, the framing
    // of the response is broken and only closing is honest.
    TERN_LOG_ERROR("conn {}: handler for {} {} did not finish its response", conn_->id().slot,
                   request.method_text(), request.target());
    if (!writer.started()) {
      writer.close_after();
      write_error_page(writer, 500);
    } else {
      conn_->force_close();
    }
  }
  if (shared_->on_response) shared_->on_response(request, *conn_, writer);

  input.retrieve(request.head_size() + body_consumed_);
  request.body_ = {};
  next_request(writer.keep_alive());
}

void HttpConnection::next_request(bool keep_alive) {
  req_->parser.reset();
  body_consumed_ = 0;
  request_started_ = false;
  state_ = State::kHead;
  net::Buffer& input = conn_->input();
  // Between requests the connection needs no parser: give it back.
  if (input.empty()) end_request();
  if (!keep_alive) return start_closing();
  head_timer_armed_ = false;
  if (input.empty()) return arm_timer(shared_->limits->keepalive_timeout);
  // A pipelined request is here already. Inside on_message() it is parsed
  // next, and parse_head() arms the header timer if its head is incomplete;
  // resumed after an exchange, its head is under way from now.
  if (in_message_) return;
  head_timer_armed_ = true;
  arm_timer(shared_->limits->header_timeout);
}

bool HttpConnection::begin_exchange(net::Buffer& input) {
  Request& request = req_->request;
  if (request.method() == Method::kOther) return false;  // 501 from dispatch()
  const ExchangeHandler* handler = shared_->exchange_for(request);
  if (handler == nullptr) return false;
  // The head moves out of the input buffer, which the body streams through:
  // parse a copy of it again so that the views point there.
  const size_t head = request.head_size();
  req_->head_copy.assign(input.peek(), head);
  req_->parser.reset();
  req_->parser.parse(req_->head_copy, &request);
  input.retrieve(head);
  body_consumed_ = 0;
  // "Content-Length: 0" is no body at all: nothing to stream or wait for.
  const bool has_body =
      request.body_framing() == BodyFraming::kChunked ||
      (request.body_framing() == BodyFraming::kContentLength && request.content_length() > 0);
  const bool keep_alive = request.keep_alive() && !shared_->draining;
  state_ = has_body ? State::kStreamBody : State::kAwait;
  if (!has_body) arm_timer(shared_->limits->send_timeout);  // parse_head armed the body's
  exchange().begin(this, &request, writer_context(keep_alive), has_body);
  (*handler)(exchange());
  // It may have answered already (finish() ran), or be waiting.
  if (exchange_active() && state_ == State::kStreamBody && request.expect_continue() &&
      input.empty()) {
    send_continue();
  }
  return true;
}

bool HttpConnection::stream_body(net::Buffer& input) {
  if (exchange().body_paused_) return false;
  Request& request = req_->request;
  if (request.body_framing() == BodyFraming::kContentLength) {
    const uint64_t left = request.content_length() - body_consumed_;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, input.readable_bytes()));
    if (n == 0 && left > 0) return false;
    body_consumed_ += n;
    const bool last = n == left;
    if (last) state_ = State::kAwait;
    // Consumed first, so that the connection's state is right whatever the
    // handler does; retrieving leaves the bytes where they are until the
    // next read.
    std::string_view piece(input.peek(), n);
    input.retrieve(n);
    exchange().deliver(piece, last);
    return last || state_ != State::kStreamBody;
  }
  for (;;) {
    size_t used = 0;
    std::string_view data;
    auto status = req_->chunked.next(input.view(), &used, &data);
    if (status == ChunkedDecoder::kError) {
      fail_exchange(req_->chunked.error_status(), req_->chunked.error_reason());
      return false;
    }
    if (status == ChunkedDecoder::kDone) {
      input.retrieve(used);
      state_ = State::kAwait;
      exchange().deliver({}, true);
      return true;
    }
    if (status == ChunkedDecoder::kNeedMore) {
      input.retrieve(used);
      return false;
    }
    input.retrieve(used);  // `data` stays valid, as above
    exchange().deliver(data, false);
    if (state_ != State::kStreamBody) return true;  // the handler finished
    if (exchange().body_paused_) return false;
  }
}

void HttpConnection::finish_exchange() {
  ResponseWriter& writer = *exchange().writer_;
  if (!writer.finished()) {
    TERN_LOG_ERROR("conn {}: exchange for {} {} finished without a complete response",
                   conn_->id().slot, req_->request.method_text(), req_->request.target());
    if (!writer.started()) {
      writer.close_after();
      write_error_page(writer, 500);
    } else {
      conn_->force_close();
    }
  }
  if (shared_->on_response) shared_->on_response(req_->request, *conn_, writer);
  const bool body_left = state_ == State::kStreamBody;
  const bool keep_alive =
      writer.keep_alive() && !body_left && !writer.stream_short() && !shared_->draining;
  exchange().end();
  if (!conn_->is_reading() && conn_->connected()) conn_->start_reading();
  next_request(keep_alive);
  conn_->flush();
  // Requests that arrived meanwhile: parse them, but not from inside the
  // caller (an upstream's callback, say).
  if (state_ == State::kHead && !conn_->input().empty() && !in_message_) resume_later();
}

void HttpConnection::resume_later() {
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

void HttpConnection::abort_exchange() {
  if (shared_->on_response) shared_->on_response(req_->request, *conn_, *exchange().writer_);
  exchange().end();
  state_ = State::kClosing;
  conn_->force_close();
}

void HttpConnection::fail_exchange(int status, std::string_view log_reason) {
  auto abort_handler = std::move(exchange().abort_handler_);
  const bool started = exchange().writer_->started();
  exchange().end();
  if (abort_handler) abort_handler();
  if (!started) return fail(status, log_reason);
  TERN_LOG_DEBUG("conn {}: {} after the response started: closing", conn_->id().slot, log_reason);
  state_ = State::kClosing;
  conn_->force_close();
}

// Exchange: the handler's side, carried out by the HttpConnection.

void Exchange::begin(HttpConnection* owner, const Request* request,
                     const ResponseWriter::Context& context, bool has_body) {
  owner_ = owner;
  request_ = request;
  writer_.emplace(context);
  active_ = true;
  body_complete_ = !has_body;
  body_paused_ = false;
}

void Exchange::end() {
  active_ = false;
  body_handler_ = nullptr;
  drain_handler_ = nullptr;
  abort_handler_ = nullptr;
}

void Exchange::deliver(std::string_view piece, bool last) {
  if (last) body_complete_ = true;
  if (body_handler_) body_handler_(piece, last);
}

ResponseWriter& Exchange::writer() {
  // Announce the close a finish() will make: the body is still coming, or
  // the server started draining since the exchange began.
  if ((!body_complete_ || owner_->shared_->draining) && !writer_->started()) writer_->close_after();
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

void HttpConnection::fail(int status, std::string_view log_reason) {
  // Peer-caused: debug level, as the style guide asks.
  TERN_LOG_DEBUG("conn {} {}: {} {}", conn_->id().slot, conn_->peer_address().to_ip_port(), status,
                 log_reason);
  ResponseWriter writer(writer_context(false));
  write_error_page(writer, status);
  // The request may be half parsed: log it as an empty one.
  if (shared_->on_response) shared_->on_response(Request{}, *conn_, writer);
  start_closing();
}

void HttpConnection::start_closing() {
  state_ = State::kClosing;
  if (conn_->input().empty()) {
    // Nothing unread: close once the response is out, as nginx does. (The
    // next bytes might still be on their way; the peer then sees a reset,
    // which is what an HTTP/1.0 client or "Connection: close" agreed to.)
    // close_after_write() writes the response itself, so that the FIN
    // leaves in the same packet as its last bytes.
    conn_->close_after_write();
    arm_timer(shared_->limits->send_timeout);
    return;
  }
  conn_->flush();
  // Unread input: closing now would reset the connection and could destroy
  // our response in the peer's buffer. Half-close, keep reading (and
  // discarding) until the peer closes or the linger timeout.
  conn_->shutdown();
  arm_timer(shared_->limits->linger_timeout);
}

void HttpConnection::close_if_idle() {
  if (state_ == State::kHead && !request_started_ && conn_ != nullptr) {
    start_closing();
  }
}

ResponseWriter::Context HttpConnection::writer_context(bool keep_alive) const {
  ResponseWriter::Context ctx;
  ctx.conn = conn_;
  ctx.version = req_ != nullptr ? req_->request.version() : Version::kHttp11;
  ctx.head_only = req_ != nullptr && req_->request.method() == Method::kHead;
  ctx.keep_alive = keep_alive;
  const HttpShared::Clock clock = shared_->clock();
  ctx.date = clock.date;
  ctx.ok_head = clock.ok_head;
  ctx.server = shared_->server_name;
  return ctx;
}

void HttpConnection::arm_timer(std::chrono::milliseconds delay) {
  progress_mark_ = conn_->bytes_sent() + conn_->bytes_received();
  timeout_.arm(delay);
}

void HttpConnection::on_timer() {
  if (conn_ == nullptr) return;
  const HttpLimits& limits = *shared_->limits;
  const bool moved = conn_->bytes_sent() + conn_->bytes_received() != progress_mark_;
  if (conn_->pending_output_bytes() > 0) {
    // Sending (a last response too): the client must keep taking bytes.
    if (moved) return arm_timer(limits.send_timeout);
    TERN_LOG_DEBUG("conn {}: send timeout", conn_->id().slot);
    return conn_->force_close();
  }
  if (state_ == State::kClosing) return conn_->force_close();  // lingered long enough
  if (state_ == State::kBody) {
    if (moved) return arm_timer(limits.body_timeout);
    return fail(408, "body timeout");
  }
  if (state_ == State::kStreamBody) {
    // A paused body waits for the handler, not for the client.
    if (moved || exchange().body_paused_) return arm_timer(limits.body_timeout);
    return fail_exchange(408, "body timeout");
  }
  // Waiting for the handler, which keeps its own time (an upstream's
  // read timeout, say).
  if (state_ == State::kAwait) return arm_timer(limits.send_timeout);
  if (request_started_) return fail(408, "header timeout");
  conn_->force_close();  // keep-alive idle
}

}  // namespace tern::http
