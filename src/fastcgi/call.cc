#include "fastcgi/call.h"

#include "base/log.h"
#include "http/error_page.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"

namespace tern::fastcgi {
namespace {

constexpr uint16_t kRequestId = 1;
// Queued bytes at which a side stops feeding the other: the client's body
// into the upstream, the upstream's response into the client.
constexpr size_t kHighWater = 256 * 1024;
// A streamed body waiting for its connection pauses the client beyond this.
constexpr size_t kMaxPendingBody = 64 * 1024;
// Read from a spool at a time.
constexpr size_t kSpoolPiece = 64 * 1024;
constexpr size_t kMaxStderrLine = 4096;

}  // namespace

bool is_unrelayed_field(std::string_view name) {
  constexpr std::string_view kAccel = "X-Accel-";
  return http::iequals(name, "Connection") || http::iequals(name, "Keep-Alive") ||
         http::iequals(name, "Transfer-Encoding") || http::iequals(name, "Content-Length") ||
         http::iequals(name, "Date") || http::iequals(name, "Server") ||
         http::iequals(name, "X-Sendfile") || http::iequals(name, "X-Lighttpd-Send-File") ||
         (name.size() > kAccel.size() && http::iequals(name.substr(0, kAccel.size()), kAccel));
}

void Call::start(http::Exchange& exchange, net::ConnectionPool& pool, const CallOptions& options,
                 RequestHeadWriter head_writer, std::unique_ptr<ResponseTap> tap) {
  std::unique_ptr<Call> owned(new Call(exchange, pool, options, std::move(head_writer), std::move(tap)));
  Call* call = owned.get();
  exchange.adopt(std::move(owned));
  call->begin();
}

Call::Call(http::Exchange& exchange, net::ConnectionPool& pool, const CallOptions& options,
           RequestHeadWriter head_writer, std::unique_ptr<ResponseTap> tap)
    : exchange_(&exchange),
      pool_(pool),
      options_(options),
      head_writer_(std::move(head_writer)),
      tap_(std::move(tap)),
      loop_(exchange.loop()) {}

void Call::begin() {
  const bool chunked = exchange_->request().body_framing() == http::BodyFraming::kChunked;
  buffer_body_ = !exchange_->body_complete() && (options_.request_buffering || chunked);
  replayable_ = buffer_body_ || exchange_->body_complete();
  exchange_->set_body_handler([this](std::string_view piece, bool last) { on_body(piece, last); });
  exchange_->set_drain_handler([this] { on_client_drained(); });
  exchange_->set_abort_handler([this] { on_client_gone(); });
  if (buffer_body_) {
    // The connection is taken once the body is in (on_body).
    body_.configure(options_.request_memory, options_.temp_dir);
    return;
  }
  head_writer_(pending_, std::nullopt);
  head_written_ = true;
  if (exchange_->body_complete()) {
    append_stream(pending_, RecordType::kStdin, kRequestId, {});
    stdin_done_ = true;
  }
  pool_.acquire(this);
}

void Call::on_body(std::string_view piece, bool last) {
  if (buffer_body_) {
    if (auto stored = body_.append(piece); !stored) {
      TERN_LOG_ERROR("{}: buffering a request body: {}", options_.log_name, stored.error().message());
      return fail(500, "cannot buffer the request body");
    }
    if (!last) return;
    head_writer_(pending_, body_.size());
    head_written_ = true;
    return pool_.acquire(this);
  }
  // Streaming a body of known length.
  net::Buffer& out = upstream_ != nullptr ? upstream_->output_tail_buffer() : pending_;
  if (!piece.empty()) append_stream(out, RecordType::kStdin, kRequestId, piece);
  if (last) {
    append_stream(out, RecordType::kStdin, kRequestId, {});
    stdin_done_ = true;
  }
  if (upstream_ == nullptr) {
    if (pending_.readable_bytes() > kMaxPendingBody) exchange_->pause_body();
    return;
  }
  upstream_->flush();
  if (!stdin_done_ && upstream_->pending_output_bytes() > kHighWater) {
    exchange_->pause_body();
    upstream_->ask_write_complete();
  }
}

void Call::on_lease(net::TcpConnection& conn) {
  if (done_) return pool_.release(this, false);
  upstream_ = &conn;
  // A connection that served before may have been closed by the
  // application meanwhile; a new one that closes unanswered may have run
  // the request (a worker that died in it).
  stale_possible_ = conn.bytes_received() > 0;
  if (!conn.is_reading()) conn.start_reading();
  records_.reset();
  head_.reset();
  arm_read_timer();
  send_request();
}

void Call::send_request() {
  if (!pending_.empty()) upstream_->send(pending_);
  if (buffer_body_) return pump_body();
  if (stdin_done_ || exchange_ == nullptr) return;
  if (upstream_->pending_output_bytes() > kHighWater) {
    upstream_->ask_write_complete();
  } else {
    exchange_->resume_body();
  }
}

// STDIN records from the buffered body, as fast as the upstream takes them.
void Call::pump_body() {
  while (!stdin_done_ && upstream_->pending_output_bytes() <= kHighWater) {
    Result<std::string_view> piece = body_.read(body_sent_, kSpoolPiece, &scratch_);
    if (!piece) {
      TERN_LOG_ERROR("{}: reading a buffered request body: {}", options_.log_name,
                     piece.error().message());
      return fail(500, "cannot read the buffered request body");
    }
    append_stream(upstream_->output_tail_buffer(), RecordType::kStdin, kRequestId, *piece);
    body_sent_ += piece->size();
    stdin_done_ = piece->empty();  // the empty record ends the stream
    upstream_->flush();
  }
  if (!stdin_done_) upstream_->ask_write_complete();
}

void Call::on_lease_failed(net::ConnectionPool::Failure failure, std::string_view why) {
  upstream_ = nullptr;  // the pool is gone, if we had a connection from it
  if (failure == net::ConnectionPool::Failure::kOverloaded) {
    TERN_LOG_EVERY_SECOND(spdlog::level::err, "{}: {}", options_.log_name, why);
    return fail(503, why);
  }
  TERN_LOG_EVERY_SECOND(spdlog::level::err, "{}: connect failed: {}", options_.log_name, why);
  fail(502, why);
}

void Call::on_upstream_drained(net::TcpConnection& /*conn*/) {
  if (upstream_ == nullptr || stdin_done_) return;
  if (buffer_body_) return pump_body();
  if (exchange_ != nullptr) exchange_->resume_body();
}

void Call::on_upstream_message(net::TcpConnection& /*conn*/, net::Buffer& input) {
  answered_ = true;
  if (read_timer_.valid()) loop_->refresh_timer(read_timer_, options_.read_timeout);
  for (;;) {
    size_t used = 0;
    Event event = records_.next(input.view(), &used);
    // Retrieving keeps the bytes in place until the next read: the event's
    // view stays valid.
    input.retrieve(used);
    switch (event.kind) {
      case Event::kNeedMore:
        break;
      case Event::kError:
        TERN_LOG_ERROR("{}: bad FastCGI record: {}", options_.log_name, records_.error());
        return fail(502, "bad FastCGI record");
      case Event::kStdout:
        if (!on_stdout(event.data)) return;
        continue;
      case Event::kStderr:
        on_stderr(event.data, false);
        continue;
      case Event::kStreamEnd:
      case Event::kOther:
        continue;
      case Event::kEndRequest:
        return on_end_request(event, input);
    }
    break;
  }
  if (exchange_ == nullptr) return;
  exchange_->flush();
  if (response_.empty() && exchange_->pending_output_bytes() <= kHighWater) return;
  exchange_->wait_for_drain();
  // Relaying as it comes, or the temp file is full: the application waits
  // for the client.
  if (!buffer_response_ || response_.size() >= options_.max_temp_file) pause_upstream();
}

bool Call::on_stdout(std::string_view data) {
  if (exchange_ == nullptr) return true;  // the client went away
  if (!response_started_) {
    size_t used = 0;
    switch (head_.feed(data, &used)) {
      case CgiHeadParser::kNeedMore:
        return true;
      case CgiHeadParser::kError:
        TERN_LOG_ERROR("{}: bad response head: {}", options_.log_name, head_.error());
        fail(502, "bad response head");
        return false;
      case CgiHeadParser::kComplete:
        break;
    }
    if (!write_response_head()) return false;
    data.remove_prefix(used);
  }
  if (data.empty()) return true;
  if (tap_) tap_->on_body(data);
  return relay(data);
}

bool Call::write_response_head() {
  const int status = head_.status();
  if (status < 200) {
    // An interim response would leave the client waiting for the final
    // one, and a 101 would claim a protocol switch that never happens.
    TERN_LOG_ERROR("{}: the application answered {}, which is not a final status",
                   options_.log_name, status);
    fail(502, "1xx status from the application");
    return false;
  }
  response_started_ = true;
  if (options_.internal_redirect) {
    if (std::string_view target = head_.header("X-Accel-Redirect"); !target.empty()) {
      http::Exchange* exchange = exchange_;
      exchange_ = nullptr;  // answered elsewhere from now on
      done();
      options_.internal_redirect(target, head_, *exchange);
      return false;
    }
  }
  http::ResponseWriter& writer = exchange_->writer();
  // Compressed on the way (a location's compression) unless PHP coded it.
  const bool coded = status == 200 && head_.header("Content-Encoding").empty() &&
                     writer.compress_for(head_.header("Content-Type"), head_.content_length()) !=
                         http::Coding::kIdentity;
  writer.start(status, head_.reason());
  relayed_.clear();
  for (const http::Header& field : head_.headers()) {
    if (is_unrelayed_field(field.name)) continue;
    if (coded && http::iequals(field.name, "ETag") && !field.value.starts_with("W/")) {
      // Another representation: its validator can only be weak.
      writer.header(field.name, "W/" + std::string(field.value));
    } else if (!(writer.varies() && http::iequals(field.name, "Vary") &&
                 http::iequals(field.value, "Accept-Encoding"))) {
      writer.header(field.name, field.value);
    }
    if (tap_) relayed_.push_back(field);
  }
  if (!options_.extra_header_name.empty()) {
    writer.header(options_.extra_header_name, options_.extra_header_value);
  }
  if (tap_) tap_->on_head(status, relayed_);
  buffer_response_ =
      options_.response_buffering && !http::iequals(head_.header("X-Accel-Buffering"), "no");
  if (buffer_response_) response_.configure(options_.response_memory, options_.temp_dir);
  if (auto length = head_.content_length()) {
    writer.begin_stream(*length);
  } else {
    writer.begin_stream();
  }
  return true;
}

// To the client if it keeps up, else into the spool behind what waits
// there already (buffering), or to the client anyway (relaying as it comes:
// the caller then pauses the upstream).
bool Call::relay(std::string_view data) {
  if (!buffer_response_ ||
      (response_.empty() && exchange_->pending_output_bytes() <= kHighWater)) {
    exchange_->writer().write(data);
    return true;
  }
  if (auto stored = response_.append(data); !stored) {
    TERN_LOG_ERROR("{}: buffering a response: {}", options_.log_name, stored.error().message());
    fail(500, "cannot buffer the response");
    return false;
  }
  return true;
}

// Moves spooled response bytes to the client while it keeps up. False if
// the call failed.
bool Call::pump_response() {
  while (response_sent_ < response_.size()) {
    if (exchange_->pending_output_bytes() > kHighWater) {
      exchange_->wait_for_drain();
      return true;
    }
    Result<std::string_view> piece = response_.read(response_sent_, kSpoolPiece, &scratch_);
    if (!piece) {
      TERN_LOG_ERROR("{}: reading a buffered response: {}", options_.log_name,
                     piece.error().message());
      fail(500, "cannot read the buffered response");
      return false;
    }
    exchange_->writer().write(*piece);
    response_sent_ += piece->size();
    exchange_->flush();
  }
  response_.clear();
  response_sent_ = 0;
  return true;
}

void Call::on_client_drained() {
  if (exchange_ == nullptr || !pump_response()) return;
  if (!response_.empty()) return;  // more when the client has taken this
  if (upstream_done_) return end_response();
  resume_upstream();
}

void Call::pause_upstream() {
  if (upstream_ == nullptr) return;
  upstream_->stop_reading();
  // The application waits for the client now, not the other way round.
  if (read_timer_.valid()) loop_->cancel(read_timer_);
  read_timer_ = net::TimerId{};
}

void Call::resume_upstream() {
  if (upstream_ == nullptr || upstream_->is_reading()) return;
  upstream_->start_reading();
  arm_read_timer();
}

void Call::on_stderr(std::string_view data, bool flush) {
  // Line by line, each line bounded, so one log line is one message.
  while (!data.empty()) {
    size_t newline = data.find('\n');
    std::string_view part = data.substr(0, newline);
    if (stderr_line_.size() < kMaxStderrLine) {
      stderr_line_.append(part.substr(0, kMaxStderrLine - stderr_line_.size()));
    }
    if (newline == std::string_view::npos) break;
    data.remove_prefix(newline + 1);
    if (!stderr_line_.empty() && stderr_line_.back() == '\r') stderr_line_.pop_back();
    if (!stderr_line_.empty()) TERN_LOG_WARN("{} stderr: {}", options_.log_name, stderr_line_);
    stderr_line_.clear();
  }
  if (flush && !stderr_line_.empty()) {
    TERN_LOG_WARN("{} stderr: {}", options_.log_name, stderr_line_);
    stderr_line_.clear();
  }
}

void Call::on_end_request(const Event& event, const net::Buffer& input) {
  on_stderr({}, true);
  const bool clean = event.protocol_status == ProtocolStatus::kRequestComplete &&
                     records_.at_record_boundary() && input.empty() && stdin_done_;
  // The application is done: its connection goes back now, whatever the
  // client still has to download.
  pool_.release(this, clean);
  upstream_ = nullptr;
  if (read_timer_.valid()) loop_->cancel(read_timer_);
  read_timer_ = net::TimerId{};
  if (!response_started_) {
    if (event.protocol_status == ProtocolStatus::kOverloaded) return fail(503, "application overloaded");
    TERN_LOG_ERROR("{}: request ended without a complete response head", options_.log_name);
    return fail(502, "no response head");
  }
  upstream_done_ = true;
  if (exchange_ == nullptr) return done();
  exchange_->flush();
  if (!response_.empty()) return exchange_->wait_for_drain();  // then end_response()
  end_response();
}

void Call::end_response() {
  http::ResponseWriter& writer = exchange_->writer();
  writer.end_stream();
  const bool complete = !writer.stream_short();
  if (tap_) tap_->on_end(complete);
  tap_.reset();
  if (!complete) {
    // What arrived goes out; the close says the rest never will.
    TERN_LOG_ERROR("{}: response shorter than its Content-Length", options_.log_name);
    exchange_->abort();
  } else {
    exchange_->finish();
  }
  exchange_ = nullptr;
  done();
}

void Call::on_upstream_closed(net::TcpConnection& /*conn*/) {
  upstream_ = nullptr;  // the lease ended with the connection
  if (done_) return;
  // A pooled connection the application had closed (a worker recycled):
  // nothing was done with the request, so try once more, if what it sent
  // can be sent again. Never on a connection opened for this request: the
  // application may have acted on it (a POST must not run twice).
  if (!answered_ && !retried_ && stale_possible_ && exchange_ != nullptr && replayable_) {
    retried_ = true;
    if (read_timer_.valid()) loop_->cancel(read_timer_);
    read_timer_ = net::TimerId{};
    pending_.retrieve_all();
    if (buffer_body_) {
      head_writer_(pending_, body_.size());
      body_sent_ = 0;
      stdin_done_ = false;
    } else {
      head_writer_(pending_, std::nullopt);
      append_stream(pending_, RecordType::kStdin, kRequestId, {});
      stdin_done_ = true;
    }
    return pool_.acquire(this);
  }
  TERN_LOG_ERROR("{}: connection closed {}", options_.log_name,
                 response_started_ ? "in the middle of the response" : "before a response");
  fail(502, "upstream closed the connection");
}

void Call::arm_read_timer() {
  if (read_timer_.valid()) loop_->cancel(read_timer_);
  read_timer_ = loop_->run_after(options_.read_timeout, [this] {
    read_timer_ = net::TimerId{};
    on_read_timeout();
  });
}

void Call::on_read_timeout() {
  TERN_LOG_ERROR("{}: no response within {} ms", options_.log_name, options_.read_timeout.count());
  fail(504, "read timeout");
}

void Call::on_client_gone() {
  exchange_ = nullptr;
  done();
}

void Call::fail(int status, std::string_view why) {
  if (exchange_ != nullptr) {
    if (!response_started_) {
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
  pool_.cancel(this);
  upstream_ = nullptr;
  body_.clear();
  response_.clear();
  // The exchange ended (or is ending): it destroys this call after the round.
}

}  // namespace tern::fastcgi
