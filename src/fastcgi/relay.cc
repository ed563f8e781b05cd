#include "fastcgi/relay.h"

#include <algorithm>

#include "base/log.h"

namespace tern::fastcgi {
namespace {

constexpr uint16_t kRequestId = 1;
constexpr size_t kMaxStderrLine = 4096;

}  // namespace

Codec::Codec(RequestHeadWriter head_writer, std::string_view log_name, std::string_view request_id,
             http::ResponseParser::Limits limits)
    : head_writer_(std::move(head_writer)), log_name_(log_name), head_(limits) {
  request_id_size_ = static_cast<uint8_t>(std::min(request_id.size(), request_id_.size()));
  std::copy_n(request_id.data(), request_id_size_, request_id_.data());
}

void Codec::write_head(net::Buffer& out, std::optional<uint64_t> content_length) {
  head_writer_(out, content_length);
}

void Codec::write_body(net::Buffer& out, std::string_view piece, bool last) {
  if (!piece.empty()) append_stream(out, RecordType::kStdin, kRequestId, piece);
  if (last) append_stream(out, RecordType::kStdin, kRequestId, {});  // the end of STDIN
}

void Codec::reset() {
  records_.reset();
  head_.reset();
  view_ = {};
  body_after_head_ = {};
  stderr_line_.clear();
  error_.clear();
  error_status_ = 502;
  head_done_ = false;
  clean_ = false;
}

upstream::Codec::Event Codec::next(net::Buffer& input) {
  if (!body_after_head_.empty()) {
    const std::string_view rest = body_after_head_;
    body_after_head_ = {};
    return {Event::kBody, rest};
  }
  for (;;) {
    size_t used = 0;
    fastcgi::Event event = records_.next(input.view(), &used);
    // Retrieving keeps the bytes in place until the next read: the event's
    // view stays valid.
    input.retrieve(used);
    switch (event.kind) {
      case fastcgi::Event::kNeedMore:
        return {};
      case fastcgi::Event::kError:
        error_ = "bad FastCGI record: " + std::string(records_.error());
        return {Event::kError, {}};
      case fastcgi::Event::kStdout: {
        if (head_done_) return {Event::kBody, event.data};
        size_t head_used = 0;
        switch (head_.feed(event.data, &head_used)) {
          case CgiHeadParser::kNeedMore:
            continue;
          case CgiHeadParser::kError:
            error_ = "bad response head: " + std::string(head_.error());
            return {Event::kError, {}};
          case CgiHeadParser::kComplete:
            break;
        }
        head_done_ = true;
        view_.status = head_.status();
        view_.reason = head_.reason();
        view_.headers = head_.headers();
        view_.content_length = head_.content_length();
        body_after_head_ = event.data.substr(head_used);
        return {Event::kHead, {}};
      }
      case fastcgi::Event::kStderr:
        on_stderr(event.data, false);
        continue;
      case fastcgi::Event::kStreamEnd:
      case fastcgi::Event::kOther:
        continue;
      case fastcgi::Event::kEndRequest:
        on_stderr({}, true);
        clean_ = event.protocol_status == ProtocolStatus::kRequestComplete && records_.at_record_boundary();
        if (!head_done_) {
          const bool overloaded = event.protocol_status == ProtocolStatus::kOverloaded;
          error_status_ = overloaded ? 503 : 502;
          error_ = overloaded ? "application overloaded" : "request ended without a complete response head";
        }
        return {Event::kEnd, {}};
    }
  }
}

void Codec::on_stderr(std::string_view data, bool flush) {
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
    if (!stderr_line_.empty()) log_stderr_line();
    stderr_line_.clear();
  }
  if (flush && !stderr_line_.empty()) {
    log_stderr_line();
    stderr_line_.clear();
  }
}

void Codec::log_stderr_line() const {
  TERN_LOG_WARN("{} stderr: {} (request {})", log_name_, stderr_line_,
                std::string_view(request_id_.data(), request_id_size_));
}

void relay(http::Exchange& exchange, upstream::Group& group, const upstream::CallOptions& options,
           RequestHeadWriter head_writer, std::unique_ptr<upstream::ResponseTap> tap) {
  upstream::Call::start<Codec>(exchange, group, options, std::move(tap), std::move(head_writer),
                               options.log_name, exchange.request().id(), options.response_head);
}

}  // namespace tern::fastcgi
