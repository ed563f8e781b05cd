#include "http1/http1_connection.h"

#include <algorithm>
#include <any>
#include <string>

#include "base/log.h"
#include "http/status.h"
#include "net/buffer.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"

namespace tern::http {

namespace {

// How long a graceful stop leaves an idle keep-alive connection open for a
// request already on its way (close_if_idle()).
constexpr std::chrono::milliseconds kDrainIdleGrace{1000};

}  // namespace

void Http1Connection::attach(net::TcpConnection* conn, bool h2c_address) {
  conn_ = conn;
  req_ = nullptr;
  state_ = State::kHead;
  request_started_ = continue_sent_ = head_timer_armed_ = false;
  body_spooled_ = output_paused_ = drain_when_written_ = false;
  h2c_first_ = h2c_address;
  arm_timer(shared_->limits->keepalive_timeout);
}

void Http1Connection::on_close() {
  timeout_.cancel();
  // The client went away first: the request is logged as it stands (499
  // if nothing was answered, as nginx), then the handler is told, and
  // lets go of it.
  if (exchange_active()) {
    exchange().response().client_closed();
    if (shared_->on_response) shared_->on_response(req_->request, *conn_, exchange().response());
    exchange().cancel();
  }
  end_request();
  conn_ = nullptr;
}

void Http1Connection::on_write_complete() {
  if (exchange_active()) return exchange().drained();
  if (!output_paused_) {
    // Stopping: the response that was going out when the stop began is
    // out; the client gets the same grace as an idle one.
    const bool drain = drain_when_written_;
    drain_when_written_ = false;
    if (drain && state_ == State::kHead && !request_started_) {
      arm_timer(std::min(kDrainIdleGrace, shared_->limits->keepalive_timeout));
    }
    return;
  }
  // The responses queued before a pipelined request are out: go on.
  output_paused_ = false;
  if (state_ != State::kHead || !conn_->connected()) return;
  conn_->start_reading();
  on_message(conn_->input());
}

bool Http1Connection::output_backlogged() const {
  return conn_->pending_output_bytes() > kOutputHighWater;
}

void Http1Connection::wait_for_output() {
  // Parsing on would queue a response for every request the client sends,
  // whether it reads them or not. Let the kernel hold its requests instead,
  // and give the output send_timeout to make progress.
  output_paused_ = true;
  conn_->stop_reading();
  conn_->ask_write_complete();
  arm_timer(shared_->limits->send_timeout);
}

void Http1Connection::begin_request() {
  if (req_ != nullptr) return;
  req_ = shared_->states->acquire();
  req_->parser.set_limits(shared_->limits->parser);
  req_->parser.reset();
  req_->body_consumed = 0;
}

void Http1Connection::end_request() {
  if (req_ == nullptr) return;
  shared_->states->release(std::move(req_), conn_->loop()->clock().now());
}

void Http1Connection::on_message(net::Buffer& input) {
  in_message_ = true;
  for (bool more = true; more;) {
    switch (state_) {
      case State::kHead:
        if (input.empty()) {
          more = false;
        } else if (!output_backlogged()) {
          more = parse_head(input) && start_request(input);
        } else {
          wait_for_output();
          more = false;
        }
        break;
      case State::kBody:
        more = !input.empty() && read_body(input);
        if (more) dispatch(input);
        break;
      case State::kStreamBody:
        more = stream_body(input);
        break;
      case State::kDiscard:
        more = discard_body(input);
        break;
      case State::kTunnel:
        if (!input.empty() && !exchange().body_paused()) {
          exchange().deliver(input.view(), false);
          input.retrieve_all();
        }
        more = false;
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

bool Http1Connection::parse_head(net::Buffer& input) {
  if (!request_started_) {
    request_started_ = true;
    begin_request();
    req_->request.set_received_ms(static_cast<int64_t>(conn_->loop()->clock().now_ms()));
    req_->request.set_client_address(conn_->client_address());
  }
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
      if (h2c_first_ && !names_http1(input.view())) {
        // A bad HTTP/2 preface (see attach()).
        TERN_LOG_DEBUG("conn {}: neither HTTP/1 nor the HTTP/2 preface: closed", conn_->id().slot);
        conn_->force_close();
        return false;
      }
      fail(req_->parser.error_status(), req_->parser.error_reason());
      return false;
    case ParseStatus::kComplete:
      h2c_first_ = false;
      break;
  }
  req_->body_consumed = 0;
  body_spooled_ = continue_sent_ = false;
  return true;
}

// Whether the first line of `input` ends with an HTTP/1 version, as every
// HTTP/1.0 and 1.1 request line does (what else is wrong with it, the
// parser says).
bool Http1Connection::names_http1(std::string_view input) {
  const size_t eol = input.find('\n');
  if (eol == std::string_view::npos) return true;  // not a whole line: the parser's answer stands
  std::string_view line = input.substr(0, eol);
  if (line.ends_with('\r')) line.remove_suffix(1);
  const size_t space = line.rfind(' ');
  return space != std::string_view::npos && line.substr(space + 1).starts_with("HTTP/1.");
}

bool Http1Connection::limit_body(uint64_t max_body) {
  const Request& request = req_->request;
  if (request.body_framing() == BodyFraming::kContentLength && request.content_length() > max_body) {
    fail(413, "Content-Length over the body limit", true);
    return false;
  }
  if (request.body_framing() == BodyFraming::kChunked) {
    req_->chunked = ChunkedDecoder(ChunkedDecoder::Limits{
        .max_body = max_body, .max_framing = ChunkedDecoder::framing_allowance(max_body)});
  }
  return true;
}

// The head is complete: the server's handlers are asked, in order, which
// of them answers it, and how (handler.h). An unknown method is 501 without
// asking them or reading a body (dispatch() answers it).
bool Http1Connection::start_request(net::Buffer& input) {
  const Request& request = req_->request;
  const bool has_body = request.body_framing() != BodyFraming::kNone;
  Route& route = req_->route;
  req_->dispatch = choose_handler(*shared_->handlers, request, *conn_, &route);
  if (has_body && !limit_body(route.max_body.value_or(shared_->limits->max_body_bytes))) return false;
  switch (req_->dispatch.claim) {
    case Claim::kExchange:
      begin_exchange(input);
      return true;
    case Claim::kRespond:
      // Answered from the head; a body behind it is dropped as it arrives.
      if (has_body) {
        begin_exchange(input);
        return true;
      }
      break;
    case Claim::kRespondWithBody:
      if (has_body) return begin_body(input);
      break;
    default:
      break;
  }
  dispatch(input);
  return true;
}

void Http1Connection::dispatch(net::Buffer& input) {
  Request& request = req_->request;
  // Answered straight from the head (501 for an unknown method): a body
  // behind it is not read, and the connection cannot go on.
  const bool body_unread = request.method() == Method::kOther &&
                           request.body_framing() != BodyFraming::kNone &&
                           !(request.body_framing() == BodyFraming::kContentLength &&
                             request.content_length() == 0);
  const bool keep_alive = request.keep_alive() && !shared_->draining && !body_unread;
  ResponseWriter writer(writer_context(keep_alive));
  // A response begun and not finished: its framing is broken, and only
  // closing is honest.
  if (!answer(req_->dispatch, req_->route, request, writer, conn_->id().slot, 0)) conn_->force_close();
  if (shared_->on_response) shared_->on_response(request, *conn_, writer);

  if (!body_spooled_) input.retrieve(request.head_size() + req_->body_consumed);
  request.body_ = {};
  next_request(writer.keep_alive(), body_unread);
}

void Http1Connection::next_request(bool keep_alive, bool more_input_expected) {
  req_->parser.reset();
  req_->body.clear();
  req_->body_consumed = 0;
  request_started_ = body_spooled_ = false;
  state_ = State::kHead;
  net::Buffer& input = conn_->input();
  // Between requests the connection needs no parser: give it back.
  if (input.empty()) end_request();
  if (!keep_alive) return start_closing(more_input_expected);
  head_timer_armed_ = false;
  if (input.empty()) return arm_timer(shared_->limits->keepalive_timeout);
  // A pipelined request is here already. Inside on_message() it is parsed
  // next, and parse_head() arms the header timer if its head is incomplete;
  // resumed after an exchange, its head is under way from now.
  if (in_message_) return;
  head_timer_armed_ = true;
  arm_timer(shared_->limits->header_timeout);
}

void Http1Connection::fail(int status, std::string_view log_reason, bool parsed) {
  // Peer-caused: debug level, as the style guide asks.
  TERN_LOG_DEBUG("conn {} {}: {} {}", conn_->id().slot, conn_->peer_address().to_ip_port(), status,
                 log_reason);
  ResponseWriter writer(writer_context(false));
  write_error_page(writer, status);
  // A half-parsed request is logged as an empty one.
  if (shared_->on_response) {
    if (parsed && req_ != nullptr) {
      shared_->on_response(req_->request, *conn_, writer);
    } else {
      shared_->on_response(Request{}, *conn_, writer);
    }
  }
  // The rest of the request may still be on its way.
  start_closing(true);
}

void Http1Connection::start_closing(bool more_input_expected) {
  state_ = State::kClosing;
  if (conn_->input().empty() && !more_input_expected) {
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
  // Unread input, or input still to come (a body we did not read): closing
  // now would reset the connection and could destroy our response in the
  // peer's buffer. Half-close, keep reading (and discarding) until the peer
  // closes or the linger timeout.
  conn_->shutdown();
  arm_timer(shared_->limits->linger_timeout);
}

void Http1Connection::close_if_idle() {
  if (state_ == State::kHead && !request_started_ && conn_ != nullptr) {
    // Not closed at once: a client that got its last response a moment ago
    // may have its next request on the way, and would see it fail against
    // the close. What arrives within a grace is answered (with Connection:
    // close, the server draining); then on_timer() closes the idle one.
    // Still sending its last response (a download, or bytes the kernel has
    // not taken yet), it gets the grace once that is out.
    if (conn_->pending_output_bytes() > 0) {
      drain_when_written_ = true;
      return conn_->ask_write_complete();
    }
    arm_timer(std::min(kDrainIdleGrace, shared_->limits->keepalive_timeout));
  }
}

Http1Connection::Phase Http1Connection::phase() const {
  if (conn_ != nullptr && conn_->pending_output_bytes() > 0) return Phase::kWriting;
  switch (state_) {
    case State::kHead:
      return request_started_ ? Phase::kReading : Phase::kIdle;
    case State::kBody:
    case State::kStreamBody:
      return Phase::kReading;
    default:
      return Phase::kWriting;
  }
}

ResponseWriter::Context Http1Connection::writer_context(bool keep_alive) {
  ResponseWriter::Context ctx;
  output_.begin(conn_, req_ != nullptr ? req_->request.version() : Version::kHttp11);
  ctx.stream = &output_;
  ctx.head_only = req_ != nullptr && req_->request.method() == Method::kHead;
  ctx.keep_alive = keep_alive;
  const HttpShared::Clock clock = shared_->clock();
  ctx.date = clock.date;
  ctx.ok_head = clock.ok_head;
  ctx.server = shared_->server_name;
  return ctx;
}

void Http1Connection::arm_timer(std::chrono::milliseconds delay) {
  sent_mark_ = static_cast<uint32_t>(conn_->bytes_sent());
  received_mark_ = static_cast<uint32_t>(conn_->bytes_received());
  timeout_.arm(delay);
}

void Http1Connection::on_timer() {
  if (conn_ == nullptr) return;
  const HttpLimits& limits = *shared_->limits;
  const bool sent = static_cast<uint32_t>(conn_->bytes_sent()) != sent_mark_;
  const bool received = static_cast<uint32_t>(conn_->bytes_received()) != received_mark_;
  if (conn_->pending_output_bytes() > 0) {
    // Sending (a last response too): the client must keep taking bytes.
    // What it sends meanwhile is no progress: a client that pipelines
    // requests and never reads the answers is cut off here.
    if (sent) return arm_timer(limits.send_timeout);
    TERN_LOG_DEBUG("conn {}: send timeout", conn_->id().slot);
    return conn_->force_close();
  }
  if (state_ == State::kClosing) return conn_->force_close();  // lingered long enough
  if (state_ == State::kBody) {
    if (received) return arm_timer(limits.body_timeout);
    return fail(408, "body timeout", true);
  }
  if (state_ == State::kStreamBody) {
    // A paused body waits for the handler, not for the client.
    if (received || exchange().body_paused()) return arm_timer(limits.body_timeout);
    return fail_exchange(408, "body timeout");
  }
  if (state_ == State::kDiscard) {
    if (received) return arm_timer(limits.body_timeout);
    return conn_->force_close();  // the response went out already
  }
  // Waiting for the handler, which keeps its own time (an upstream's
  // read timeout, say), or for the output to drain.
  // In a tunnel the exchange keeps the idle time.
  if (state_ == State::kAwait || state_ == State::kTunnel || output_paused_) {
    return arm_timer(limits.send_timeout);
  }
  if (request_started_) return fail(408, "header timeout");
  conn_->force_close();  // keep-alive idle
}

}  // namespace tern::http
