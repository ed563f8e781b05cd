#include "fastcgi/call.h"

#include "base/log.h"
#include "http/http_connection.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"

namespace tern::fastcgi {
namespace {

constexpr uint16_t kRequestId = 1;
// Queued bytes at which a side stops feeding the other: the client's body
// into the upstream, the upstream's response into the client.
constexpr size_t kHighWater = 256 * 1024;
constexpr size_t kMaxStderrLine = 4096;

// Fields of the CGI head that describe the CGI hop, not the response.
bool hop_field(std::string_view name) {
  return http::iequals(name, "Connection") || http::iequals(name, "Keep-Alive") ||
         http::iequals(name, "Transfer-Encoding") || http::iequals(name, "Content-Length") ||
         http::iequals(name, "Date") || http::iequals(name, "Server");
}

}  // namespace

void Call::start(http::Exchange& exchange, net::ConnectionPool& pool, const CallOptions& options,
                 RequestHeadWriter head_writer, std::unique_ptr<ResponseTap> tap) {
  auto* call = new Call(exchange, pool, options, std::move(head_writer), std::move(tap));
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
  const http::Request& request = exchange_->request();
  chunked_ = request.body_framing() == http::BodyFraming::kChunked;
  if (!chunked_) {
    head_writer_(pending_, std::nullopt);
    head_written_ = true;
  }
  if (exchange_->body_complete()) {
    append_stream(pending_, RecordType::kStdin, kRequestId, {});
    stdin_done_ = true;
  }
  exchange_->set_body_handler([this](std::string_view piece, bool last) { on_body(piece, last); });
  exchange_->set_drain_handler([this] { on_client_drained(); });
  exchange_->set_abort_handler([this] { on_client_gone(); });
  pool_.acquire(this);
}

void Call::on_body(std::string_view piece, bool last) {
  if (chunked_) {
    // Gathered: PHP must be told CONTENT_LENGTH before the body.
    chunked_bytes_ += piece.size();
    if (!piece.empty()) append_stream(pending_, RecordType::kStdin, kRequestId, piece);
    if (!last) return;
    net::Buffer records(0);
    head_writer_(records, chunked_bytes_);
    records.append(pending_.view());
    append_stream(records, RecordType::kStdin, kRequestId, {});
    pending_.retrieve_all();
    pending_.append(records.view());
    head_written_ = stdin_done_ = true;
    if (upstream_ != nullptr) send_pending();
    return;
  }
  net::Buffer& out = upstream_ != nullptr ? upstream_->output_tail_buffer() : pending_;
  if (!piece.empty()) append_stream(out, RecordType::kStdin, kRequestId, piece);
  if (last) {
    append_stream(out, RecordType::kStdin, kRequestId, {});
    stdin_done_ = true;
  }
  if (upstream_ == nullptr) {
    if (pending_.readable_bytes() > kHighWater) exchange_->pause_body();
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
  if (!conn.is_reading()) conn.start_reading();
  records_.reset();
  head_.reset();
  read_timer_ = loop_->run_after(options_.read_timeout, [this] {
    read_timer_ = net::TimerId{};
    on_read_timeout();
  });
  if (head_written_) send_pending();
}

void Call::send_pending() {
  if (!pending_.empty()) upstream_->send(pending_);
  if (stdin_done_ || exchange_ == nullptr) return;
  if (upstream_->pending_output_bytes() > kHighWater) {
    upstream_->ask_write_complete();
  } else {
    exchange_->resume_body();
  }
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
  if (exchange_ != nullptr && !stdin_done_) exchange_->resume_body();
}

void Call::on_client_drained() {
  if (upstream_ != nullptr) upstream_->start_reading();
}

void Call::on_upstream_message(net::TcpConnection& conn, net::Buffer& input) {
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
  if (exchange_->pending_output_bytes() > kHighWater) {
    // The client is slower than the application: let the upstream wait.
    conn.stop_reading();
    exchange_->wait_for_drain();
  }
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
    write_response_head();
    data.remove_prefix(used);
  }
  if (data.empty()) return true;
  exchange_->writer().write(data);
  if (tap_) tap_->on_body(data);
  return true;
}

void Call::write_response_head() {
  response_started_ = true;
  http::ResponseWriter& writer = exchange_->writer();
  writer.start(head_.status(), head_.reason());
  for (const http::Header& field : head_.headers()) {
    if (!hop_field(field.name)) writer.header(field.name, field.value);
  }
  if (!options_.extra_header_name.empty()) {
    writer.header(options_.extra_header_name, options_.extra_header_value);
  }
  if (tap_) tap_->on_head(head_.status(), head_.headers());
  if (auto length = head_.content_length()) {
    writer.begin_stream(*length);
  } else {
    writer.begin_stream();
  }
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
  pool_.release(this, clean);
  upstream_ = nullptr;
  if (!response_started_) {
    if (event.protocol_status == ProtocolStatus::kOverloaded) return fail(503, "application overloaded");
    TERN_LOG_ERROR("{}: request ended without a complete response head", options_.log_name);
    return fail(502, "no response head");
  }
  if (exchange_ != nullptr) {
    http::ResponseWriter& writer = exchange_->writer();
    writer.end_stream();
    const bool complete = !writer.stream_short();
    if (tap_) tap_->on_end(complete);
    tap_.reset();
    if (!complete) {
      TERN_LOG_ERROR("{}: response shorter than its Content-Length", options_.log_name);
      exchange_->abort();
    } else {
      exchange_->finish();
    }
    exchange_ = nullptr;
  }
  done();
}

void Call::on_upstream_closed(net::TcpConnection& /*conn*/) {
  upstream_ = nullptr;  // the lease ended with the connection
  if (done_) return;
  if (!answered_ && !retried_ && exchange_ != nullptr &&
      exchange_->request().body_framing() == http::BodyFraming::kNone) {
    // A pooled connection the application had closed (a worker recycled):
    // nothing was done with the request, so try once more.
    retried_ = true;
    if (read_timer_.valid()) loop_->cancel(read_timer_);
    read_timer_ = net::TimerId{};
    pending_.retrieve_all();
    head_writer_(pending_, std::nullopt);
    append_stream(pending_, RecordType::kStdin, kRequestId, {});
    return pool_.acquire(this);
  }
  TERN_LOG_ERROR("{}: connection closed {}", options_.log_name,
                 response_started_ ? "in the middle of the response" : "before a response");
  fail(502, "upstream closed the connection");
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
  // We may be inside a callback of the pool or of the exchange.
  loop_->defer([this] { delete this; });
}

}  // namespace tern::fastcgi
