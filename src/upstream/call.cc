#include "upstream/call.h"

#include <cstring>

#include "base/log.h"
#include "http/error_page.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"
#include "upstream/group.h"

namespace tern::upstream {
namespace {

// A streamed body waiting for its connection pauses the client beyond this.
constexpr size_t kMaxPendingBody = 64 * 1024;

bool idempotent(http::Method method) {
  switch (method) {
    case http::Method::kGet:
    case http::Method::kHead:
    case http::Method::kPut:
    case http::Method::kDelete:
    case http::Method::kOptions:
      return true;
    default:
      return false;
  }
}

}  // namespace

Call::Call(http::Exchange& exchange, Group& group, const CallOptions& options, Codec& codec,
           std::unique_ptr<ResponseTap> tap)
    : exchange_(&exchange),
      group_(group),
      options_(options),
      codec_(&codec),
      tap_(std::move(tap)),
      loop_(exchange.loop()) {
  group_.attach();
  const std::string_view id = exchange.request().id();
  const std::string_view before = " (request ";
  char* out = request_note_.data();
  out = std::copy(before.begin(), before.end(), out);
  out = std::copy(id.begin(), id.end(), out);  // at most 64 bytes
  *out++ = ')';
  request_note_size_ = static_cast<uint8_t>(out - request_note_.data());
}

Call::~Call() { done(); }

void Call::begin() {
  const bool chunked = exchange_->request().body_framing() == http::BodyFraming::kChunked;
  buffer_body_ = !exchange_->body_complete() && (options_.request_buffering || chunked);
  replayable_ = buffer_body_ || exchange_->body_complete();
  idempotent_ = idempotent(exchange_->request().method());
  first_try_ = loop_->clock().now();
  exchange_->set_body_handler([this](std::string_view piece, bool last) { on_body(piece, last); });
  exchange_->set_drain_handler([this] { on_client_drained(); });
  exchange_->set_abort_handler([this] { on_client_gone(); });
  if (buffer_body_) {
    // The connection is taken once the body is in (on_body).
    body_.configure(options_.request_memory, options_.temp_dir);
    return;
  }
  write_request();
  acquire();
}

// The request as far as it is known, into pending_: the head, and the end
// of a body that is complete already.
void Call::write_request() {
  pending_.retrieve_all();
  if (exchange_ == nullptr) {
    // The client went: the request as it was kept (read_on_for_tap).
    pending_.append(replay_.data(), replay_.size());
    body_done_ = true;
    return;
  }
  // Storage from the loop's pool, given back once sent: a head is written
  // field by field, and growing an empty buffer to its size would take
  // several allocations per request.
  loop_->buffers().fill(pending_);
  if (buffer_body_) {
    codec_->write_head(pending_, body_.size());
    body_sent_ = 0;
    body_done_ = false;
  } else {
    codec_->write_head(pending_, std::nullopt);
    body_done_ = exchange_ != nullptr && exchange_->body_complete();
    if (body_done_) codec_->write_body(pending_, {}, true);
  }
  head_written_ = true;
}

void Call::acquire() {
  std::optional<size_t> server = group_.pick(options_.hash_key, tried_);
  if (!server) {
    TERN_LOG_EVERY_SECOND(spdlog::level::err, "{}: no server available{}", options_.log_name, request_note());
    return fail(502, "no server available");
  }
  server_ = *server;
  tried_ |= uint64_t{1} << server_;
  ++tries_;
  attempt_open_ = true;
  attempt_began_ms_ = loop_->clock().now_ms();
  if (exchange_ != nullptr) exchange_->request().begin_upstream_attempt(static_cast<int64_t>(attempt_began_ms_));
  group_.started(server_);
  group_.pool(server_).acquire(this, options_.proxy_client ? &*options_.proxy_client : nullptr);
}

void Call::settle(bool failed) {
  if (!attempt_open_) return;
  attempt_open_ = false;
  const uint64_t elapsed = loop_->clock().now_ms() - attempt_began_ms_;
  group_.finished(server_, failed, elapsed);
  if (exchange_ != nullptr) exchange_->request().add_upstream_ms(static_cast<int64_t>(elapsed));
}

bool Call::may_send_again() const {
  return replayable_ && (idempotent_ || options_.next_non_idempotent);
}

bool Call::can_send_again() const {
  return exchange_ != nullptr || !replay_.empty();
}

bool Call::next_server_allowed() {
  if (!options_.next_server || !can_send_again() || response_started_) return false;
  if (options_.max_tries != 0 && tries_ >= options_.max_tries) return false;
  if (options_.next_server_timeout.count() > 0 &&
      loop_->clock().now() - first_try_ >= options_.next_server_timeout) {
    return false;
  }
  return tries_ < group_.size() && group_.pick(options_.hash_key, tried_).has_value();
}

// Another server for a failed attempt, if the options, the request and the
// bounds allow it (the caller checked that the request may be sent again).
bool Call::try_next_server(std::string_view why) {
  if (!next_server_allowed()) return false;
  TERN_LOG_WARN("{}: {}, trying the next server{}", group_.server_name(server_), why, request_note());
  if (read_timer_.valid()) loop_->cancel(read_timer_);
  read_timer_ = net::TimerId{};
  answered_ = false;
  write_request();
  acquire();
  return true;
}

void Call::on_body(std::string_view piece, bool last) {
  if (tunnel_) return tunnel_from_client(piece);
  if (buffer_body_) {
    if (auto stored = body_.append(piece); !stored) {
      TERN_LOG_ERROR("{}: buffering a request body: {}{}", options_.log_name, stored.error().message(), request_note());
      return fail(500, "cannot buffer the request body");
    }
    if (!last) return;
    write_request();
    return acquire();
  }
  // Streaming a body of known length.
  net::Buffer& out = upstream_ != nullptr ? upstream_->output_tail_buffer() : pending_;
  codec_->write_body(out, piece, last);
  body_done_ = last;
  if (upstream_ == nullptr) {
    if (pending_.readable_bytes() > kMaxPendingBody) exchange_->pause_body();
    return;
  }
  upstream_->flush();
  arm_read_timer();
  if (upstream_->pending_output_bytes() > kHighWater) {
    if (!body_done_) exchange_->pause_body();
    upstream_->ask_write_complete();
  }
}

void Call::on_lease(net::TcpConnection& conn) {
  if (done_) return group_.pool(server_).release(this, false);
  upstream_ = &conn;
  // A connection that served before may have been closed by the upstream
  // meanwhile; a new one that closes unanswered may have run the request
  // (a worker that died in it).
  stale_possible_ = conn.bytes_received() > 0;
  if (!conn.is_reading()) conn.start_reading();
  codec_->reset();
  arm_read_timer();
  send_request();
}

void Call::send_request() {
  if (!pending_.empty()) upstream_->send(pending_);
  loop_->buffers().drain(pending_);
  if (buffer_body_) return pump_body();
  if (body_done_ || exchange_ == nullptr) {
    if (upstream_->pending_output_bytes() > 0) upstream_->ask_write_complete();
    return;
  }
  if (upstream_->pending_output_bytes() > kHighWater) {
    upstream_->ask_write_complete();
  } else {
    exchange_->resume_body();
  }
}

// The buffered body, as fast as the upstream takes it.
void Call::pump_body() {
  while (!body_done_ && upstream_->pending_output_bytes() <= kHighWater) {
    Result<std::string_view> piece = body_.read(body_sent_, kSpoolPiece, &scratch_);
    if (!piece) {
      TERN_LOG_ERROR("{}: reading a buffered request body: {}{}", options_.log_name,
                     piece.error().message(), request_note());
      return fail(500, "cannot read the buffered request body");
    }
    body_sent_ += piece->size();
    body_done_ = piece->empty() || body_sent_ == body_.size();
    codec_->write_body(upstream_->output_tail_buffer(), *piece, body_done_);
    upstream_->flush();
  }
  arm_read_timer();
  if (upstream_->pending_output_bytes() > 0) upstream_->ask_write_complete();
}

void Call::on_lease_failed(net::ConnectionPool::Failure failure, std::string_view why) {
  upstream_ = nullptr;  // the pool is gone, if we had a connection from it
  if (failure == net::ConnectionPool::Failure::kOverloaded) {
    settle(false);
    TERN_LOG_EVERY_SECOND(spdlog::level::err, "{}: {}{}", group_.server_name(server_), why, request_note());
    return fail(503, why);
  }
  settle(true);
  // Nothing reached the server: any request may go to the next.
  if (replayable_ && try_next_server(std::string("connect failed: ") + std::string(why))) return;
  TERN_LOG_EVERY_SECOND(spdlog::level::err, "{}: connect failed: {}{}", group_.server_name(server_), why, request_note());
  // As nginx: a connect that timed out is a 504, one refused a 502.
  fail(failure == net::ConnectionPool::Failure::kConnectTimedOut ? 504 : 502, why);
}

void Call::on_upstream_drained(net::TcpConnection& /*conn*/) {
  if (tunnel_) {
    if (exchange_ != nullptr) exchange_->resume_body();
    return;
  }
  if (upstream_ == nullptr) return;
  // Progress: the upstream took what was written.
  arm_read_timer();
  if (body_done_) return;
  if (buffer_body_) return pump_body();
  if (exchange_ != nullptr) exchange_->resume_body();
}

void Call::on_upstream_message(net::TcpConnection& /*conn*/, net::Buffer& input) {
  if (tunnel_) return tunnel_from_upstream(input);
  answered_ = true;
  if (read_timer_.valid()) loop_->refresh_timer(read_timer_, options_.read_timeout);
  for (;;) {
    Codec::Event event = codec_->next(input);
    switch (event.kind) {
      case Codec::Event::kNeedMore:
        break;
      case Codec::Event::kError:
        TERN_LOG_ERROR("{}: {}{}", group_.server_name(server_), codec_->error(), request_note());
        settle(codec_->error_status() != 503);
        return fail(codec_->error_status(), codec_->error());
      case Codec::Event::kHead:
        if (exchange_ == nullptr) {
          if (!tap_response_head()) return;
          continue;
        }
        if (codec_->upgraded()) return start_tunnel(input);
        if (!write_response_head()) return;
        continue;
      case Codec::Event::kBody:
        if (!on_body_data(event.data)) return;
        continue;
      case Codec::Event::kEnd:
        return on_response_end(input);
    }
    break;
  }
  if (exchange_ == nullptr) return;
  exchange_->flush();
  if (exchange_ == nullptr) return;  // the flush ended the client's side (see on_response_end)
  if (response_.empty() && exchange_->pending_output_bytes() <= kHighWater) return;
  exchange_->wait_for_drain();
  // Relaying as it comes, or the temp file is full: the upstream waits for
  // the client.
  if (!buffer_response_ || response_.size() >= options_.max_temp_file) pause_upstream();
}

void Call::on_upstream_closed(net::TcpConnection& conn) {
  upstream_ = nullptr;  // the lease ended with the connection
  if (done_) return;
  if (tunnel_) return end_tunnel("closed by the upstream");
  // A body that ends at the close is whole only if the connection ended
  // cleanly: one cut by a reset or a failed read is a failure (below), not
  // stored and not passed on as whole, as nginx does.
  if (response_started_ && codec_->ends_at_close() && conn.close_error() == 0) {
    net::Buffer empty{0};
    return on_response_end(empty);
  }
  // A pooled connection the upstream had closed while idle: nothing was
  // done with the request, so try once more, if what it sent can be sent
  // again. Never on a connection opened for this request: the upstream may
  // have acted on it (a POST must not run twice).
  if (!answered_ && !retried_stale_ && stale_possible_ && can_send_again() && replayable_) {
    retried_stale_ = true;
    settle(false);
    if (read_timer_.valid()) loop_->cancel(read_timer_);
    read_timer_ = net::TimerId{};
    write_request();
    tried_ &= ~(uint64_t{1} << server_);
    --tries_;
    return acquire();
  }
  settle(true);
  if (!response_started_ && options_.next_on_error && may_send_again() &&
      try_next_server("connection closed before a response")) {
    return;
  }
  const int error = conn.close_error();
  TERN_LOG_ERROR("{}: connection closed {}{}{}{}", group_.server_name(server_),
                 response_started_ ? "in the middle of the response" : "before a response",
                 error != 0 ? ": " : "", error != 0 ? std::strerror(error) : "", request_note());
  fail(502, "upstream closed the connection");
}

bool Call::sending() const {
  return !tunnel_ && !answered_ && upstream_ != nullptr &&
         (!body_done_ || upstream_->pending_output_bytes() > 0);
}

void Call::arm_read_timer() {
  const auto delay = sending() && options_.send_timeout.count() > 0 ? options_.send_timeout : options_.read_timeout;
  // Pushed back in place (a tunnel does it for every message), else made.
  if (read_timer_.valid() && loop_->refresh_timer(read_timer_, delay)) return;
  read_timer_ = loop_->run_after(delay, [this] {
    read_timer_ = net::TimerId{};
    on_read_timeout();
  });
}

void Call::on_read_timeout() {
  if (tunnel_) return end_tunnel("idle");
  if (sending() && options_.send_timeout.count() > 0) {
    if (upstream_ != nullptr) group_.pool(server_).cancel(this);
    upstream_ = nullptr;
    settle(true);
    TERN_LOG_ERROR("{}: the request was not taken within {} ms{}", group_.server_name(server_),
                   options_.send_timeout.count(), request_note());
    return fail(504, "send timeout");
  }
  // The connection is mid-exchange: it cannot be reused.
  if (upstream_ != nullptr) group_.pool(server_).cancel(this);
  upstream_ = nullptr;
  settle(true);
  if (!response_started_ && options_.next_on_timeout && may_send_again() && try_next_server("no response in time")) {
    return;
  }
  TERN_LOG_ERROR("{}: no response within {} ms{}", group_.server_name(server_),
                 options_.read_timeout.count(), request_note());
  fail(504, "read timeout");
}

void Call::on_client_gone() {
  const http::Exchange* exchange = exchange_;
  exchange_ = nullptr;
  if (exchange != nullptr && read_on_for_tap(*exchange)) return;
  done();
}

bool Call::read_on_for_tap(const http::Exchange& exchange) {
  // The request must be whole where the upstream gets it: no body, one
  // sent whole, or one buffered whole.
  const bool request_whole = body_done_ || (buffer_body_ && head_written_);
  if (!tap_ || tunnel_ || upstream_done_ || !request_whole || !tap_->wants_rest()) return false;
  owner_ = self_.lock();
  if (!owner_) return false;
  tap_->on_client_gone(exchange.request());
  // Kept for another attempt: the codec writes from the request, which
  // goes with the client.
  if (!exchange.request().has_body() && !buffer_body_) {
    net::Buffer sent{0};
    codec_->write_head(sent, std::nullopt);
    codec_->write_body(sent, {}, true);
    replay_.assign(sent.peek(), sent.readable_bytes());
  }
  TERN_LOG_DEBUG("{}: the client went; reading on for the cache{}", options_.log_name, request_note());
  // Nothing is relayed any more: what waited for the client goes, and an
  // upstream paused for it reads on.
  response_.clear();
  response_sent_ = 0;
  resume_upstream();
  return true;
}

void Call::fail(int status, std::string_view why) {
  if (exchange_ != nullptr && window_full_) {
    // The client's range is whole, some of it still spooled: it goes out,
    // and only the tap loses the rest of the response.
    TERN_LOG_DEBUG("{}: {} after a range was whole: {}", options_.log_name, status, why);
    if (tap_) tap_->on_end(false);
    tap_.reset();
    if (tries_ > 0) group_.pool(server_).cancel(this);
    upstream_ = nullptr;
    if (read_timer_.valid()) loop_->cancel(read_timer_);
    read_timer_ = net::TimerId{};
    upstream_done_ = true;
    exchange_->flush();
    if (exchange_ != nullptr) exchange_->wait_for_drain();  // then end_response()
    return;
  }
  if (exchange_ != nullptr) {
    if (!response_started_ && tap_ && tap_->answer_instead(exchange_, status, {}, true)) {
      TERN_LOG_DEBUG("{}: {} ({}) answered by the tap", options_.log_name, status, why);
      exchange_->finish();
    } else if (!response_started_) {
      TERN_LOG_DEBUG("{}: answering {}: {}", options_.log_name, status, why);
      http::write_error_page(exchange_->writer(), status);
      exchange_->finish();
    } else {
      exchange_->abort();
    }
    exchange_ = nullptr;
  }
  done();
}

void Call::done() {
  if (done_) return;
  done_ = true;
  if (tap_) tap_->on_end(false);
  tap_.reset();
  if (read_timer_.valid()) loop_->cancel(read_timer_);
  read_timer_ = net::TimerId{};
  // A connection still held is mid-exchange: it cannot be reused.
  if (tries_ > 0) group_.pool(server_).cancel(this);
  settle(false);
  upstream_ = nullptr;
  body_.clear();
  response_.clear();
  // The group may go from here (a name's new addresses replaced it); the
  // call itself is destroyed after the round, perhaps after the group.
  group_.detach();
  // The exchange ended (or is ending): it destroys this call after the
  // round; a call that read on for its tap lets itself go then, and the
  // configuration after it.
  held_.reset();
  if (owner_) {
    loop_->release_after_round(std::move(owner_));
    loop_->release_after_round(std::move(kept_));
  }
}

}  // namespace tern::upstream
