// Http1Connection: the body side. A body read for a Router handler (kept
// in the input or spooled), streamed to an Exchange, or dropped after an
// early answer. The rest of the state machine is in http_connection.cc.
#include "http1/http1_connection.h"

#include <algorithm>

#include "base/log.h"
#include "net/buffer.h"
#include "net/tcp_connection.h"

namespace tern::http {

// A body for a Router handler. One of known length that fits in
// body_buffer_bytes stays in the input buffer behind its head; any other
// (larger, or chunked) goes to the request's Spool as it arrives, the head
// to a copy of its own, and the input keeps nothing of this request.
bool Http1Connection::begin_body(net::Buffer& input) {
  const HttpLimits& limits = *shared_->limits;
  const Request& request = req_->request;
  state_ = State::kBody;
  body_spooled_ = request.body_framing() == BodyFraming::kChunked ||
                  request.content_length() > limits.body_buffer_bytes;
  if (body_spooled_) {
    detach_head(input);
    req_->body.configure(limits.body_buffer_bytes, limits.temp_dir);
  }
  arm_timer(limits.body_timeout);
  return true;
}

bool Http1Connection::read_body(net::Buffer& input) {
  Request& request = req_->request;
  bool complete = false;
  if (body_spooled_) {
    if (!spool_body(input, &complete)) return false;
  } else {
    // The head stays in the buffer until the request is answered, so the
    // parsed views are derived again once the buffer stops moving.
    const size_t head = request.head_size();
    complete = input.readable_bytes() - head >= request.content_length();
    if (complete) req_->body_consumed = request.content_length();
  }
  if (!complete) {
    if (request.expect_continue() && !continue_sent_) send_continue();
    return false;
  }
  if (body_spooled_) {
    Result<std::string_view> body = req_->body.view();
    if (!body) {
      TERN_LOG_ERROR("conn {}: request body: {} (request {})", conn_->id().slot, body.error().message(),
                     request.id());
      fail(500, "cannot map the request body", true);
      return false;
    }
    request.body_ = *body;
    return true;
  }
  req_->parser.reset();
  req_->parser.parse(input.view(), &request);
  request.body_ = input.view().substr(request.head_size(), request.content_length());
  return true;
}

// Moves what arrived of the body into the spool, chunked framing decoded
// and dropped. False after failing the request.
bool Http1Connection::spool_body(net::Buffer& input, bool* complete) {
  const Request& request = req_->request;
  Spool& body = req_->body;
  Result<void> stored;
  if (request.body_framing() == BodyFraming::kContentLength) {
    const uint64_t left = request.content_length() - req_->body_consumed;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, input.readable_bytes()));
    stored = body.append(std::string_view(input.peek(), n));
    input.retrieve(n);
    req_->body_consumed += n;
    *complete = req_->body_consumed == request.content_length();
  } else {
    for (;;) {
      size_t used = 0;
      std::string_view data;
      const auto status = req_->chunked.next(input.view(), &used, &data);
      if (status == ChunkedDecoder::kError) {
        fail(req_->chunked.error_status(), req_->chunked.error_reason());
        return false;
      }
      if (status == ChunkedDecoder::kData) stored = body.append(data);
      input.retrieve(used);  // `data` stays where it is until the next read
      req_->body_consumed += used;
      if (status != ChunkedDecoder::kData || !stored) {
        *complete = status == ChunkedDecoder::kDone;
        break;
      }
    }
  }
  if (!stored) {
    TERN_LOG_ERROR("conn {}: request body: {} (request {})", conn_->id().slot, stored.error().message(),
                   req_->request.id());
    fail(500, "cannot store the request body", true);
    return false;
  }
  return true;
}

// The head moves out of the input buffer (which a body streams through, or
// which the body leaves) into a copy of its own, and the request's views
// follow it. Nothing reads into the buffer between the parse and here, so
// the head is where the parser found it; were it not, the copy is parsed
// again. (Views others took into the buffer, a route's path, are not
// moved: they hold until the next read.)
void Http1Connection::detach_head(net::Buffer& input) {
  Request& request = req_->request;
  const size_t head = request.head_size();
  req_->head_copy.assign(input.peek(), head);
  if (request.head_at() == input.peek()) {
    request.move_head(req_->head_copy.data());
  } else {
    req_->parser.reset();
    req_->parser.parse(req_->head_copy, &request);
  }
  input.retrieve(head);
}

void Http1Connection::send_continue() {
  // RFC 9110 10.1.1: tell the client to go on sending the body it announced.
  continue_sent_ = true;
  if (req_->request.version() != Version::kHttp11) return;
  conn_->output_tail_buffer().append("HTTP/1.1 100 Continue\r\n\r\n");
  conn_->flush();
}

bool Http1Connection::stream_body(net::Buffer& input) {
  if (exchange().body_paused()) return false;
  Request& request = req_->request;
  if (request.body_framing() == BodyFraming::kContentLength) {
    const uint64_t left = request.content_length() - req_->body_consumed;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, input.readable_bytes()));
    if (n == 0 && left > 0) return false;
    req_->body_consumed += n;
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
    if (exchange().body_paused()) return false;
  }
}

// Drops body bytes as they arrive; at the end of the body the connection
// goes on to the next request.
bool Http1Connection::discard_body(net::Buffer& input) {
  const Request& request = req_->request;
  bool done = false;
  if (request.body_framing() == BodyFraming::kContentLength) {
    const uint64_t left = request.content_length() - req_->body_consumed;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, input.readable_bytes()));
    input.retrieve(n);
    req_->body_consumed += n;
    done = n == left;
  } else {
    for (;;) {
      size_t used = 0;
      std::string_view data;
      const auto status = req_->chunked.next(input.view(), &used, &data);
      input.retrieve(used);
      if (status == ChunkedDecoder::kData) continue;
      if (status == ChunkedDecoder::kError) {
        // The response has gone out; the framing of what follows is lost.
        TERN_LOG_DEBUG("conn {}: discarding a body: {}", conn_->id().slot,
                       req_->chunked.error_reason());
        start_closing(true);
        return false;
      }
      done = status == ChunkedDecoder::kDone;
      break;
    }
  }
  if (!done) return false;
  next_request(!shared_->draining);
  return true;
}

// Whether a response sent before the body is in may keep the connection:
// the rest is then read and dropped. Not when the client waits for a 100
// (Continue) we have not sent: it may never send the body.
bool Http1Connection::can_discard_body() const {
  return !shared_->draining && !(req_->request.expect_continue() && !continue_sent_);
}

}  // namespace tern::http
