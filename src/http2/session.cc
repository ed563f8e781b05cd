#include "http2/session.h"

#include <nghttp2/nghttp2.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <vector>

#include "base/assert.h"

namespace tern::http2 {
namespace {

// A frame's header: length, type, flags, stream id (RFC 9113 4.1).
constexpr size_t kFrameHeader = 9;

std::string_view view(const uint8_t* data, size_t length) {
  return {reinterpret_cast<const char*>(data), length};
}


bool is_request_headers(const nghttp2_frame* frame) {
  return frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST;
}

// A frame that costs the server work and carries no part of a request.
bool is_control(const nghttp2_frame_hd& hd) {
  switch (hd.type) {
    case NGHTTP2_SETTINGS:
    case NGHTTP2_PING:
    case NGHTTP2_PRIORITY:
    case NGHTTP2_PRIORITY_UPDATE:
    case NGHTTP2_RST_STREAM:
      return true;
    case NGHTTP2_DATA:
      return hd.length == 0 && (hd.flags & NGHTTP2_FLAG_END_STREAM) == 0;
    default:
      return false;
  }
}

}  // namespace

// ---- nghttp2's callbacks ----

struct Session::Glue {
  static Session& of(void* user_data) { return *static_cast<Session*>(user_data); }

  static int on_begin_headers(nghttp2_session* /*s*/, const nghttp2_frame* frame, void* user_data) {
    if (!is_request_headers(frame)) return 0;
    Session& session = of(user_data);
    const int32_t id = frame->hd.stream_id;
    session.open_stream(id);
    session.highest_stream_ = std::max(session.highest_stream_, id);
    return 0;
  }

  static int on_header(nghttp2_session* /*s*/, const nghttp2_frame* frame, const uint8_t* name_data,
                       size_t name_length, const uint8_t* value_data, size_t value_length, uint8_t /*flags*/,
                       void* user_data) {
    // Trailers (a second HEADERS) are not passed on.
    if (!is_request_headers(frame)) return 0;
    Session& session = of(user_data);
    Stream* stream = session.find(frame->hd.stream_id);
    if (stream == nullptr) return 0;
    const std::string_view name = view(name_data, name_length);
    const std::string_view value = view(value_data, value_length);
    // What a head may decode to is bounded (an HPACK bomb: a few bytes a
    // field, each naming a large entry of the dynamic table), counted as
    // RFC 9113 sizes a field list; past it nothing more is kept, and the
    // request is answered 431.
    stream->field_bytes_ += name.size() + value.size() + 32;
    if (stream->field_bytes_ > session.limits_.parser.max_head_bytes) {
      stream->too_large_ = true;
      return 0;
    }
    // nghttp2 has checked the names and values (no CR, LF or NUL, lower
    // case) and put the pseudo-fields first.
    if (name.starts_with(':')) {
      if (name == ":method") stream->method_ = value;
      if (name == ":path") stream->path_ = value;
      if (name == ":authority") stream->authority_ = value;
      if (name == ":scheme") stream->scheme_ = value;
      return 0;
    }
    std::string& text = stream->head_text_;
    if (name == "cookie") {
      // Split into several fields to compress better (RFC 9113 8.2.3); one
      // for HTTP/1 handlers.
      if (!stream->cookies_.empty()) stream->cookies_ += "; ";
      stream->cookies_ += value;
      return 0;
    }
    if (name == "host" && !stream->authority_.empty()) return 0;  // :authority wins
    if (name == "content-length") stream->has_length_field_ = true;
    text.append(name).append(": ").append(value).append("\r\n");
    return 0;
  }

  // Every frame's header, before nghttp2 looks further (so frames it
  // would ignore, on a closed stream say, are counted too).
  static int on_begin_frame(nghttp2_session* s, const nghttp2_frame_hd* hd, void* user_data) {
    Session& session = of(user_data);
    if (is_control(*hd) && !session.charge_control_frame() && session.error_.empty()) {
      session.error_ = "flood of control frames (SETTINGS, PING, PRIORITY, RST_STREAM or empty DATA)";
      nghttp2_session_terminate_session(s, NGHTTP2_ENHANCE_YOUR_CALM);
    }
    // HEADERS on a lower stream id that is neither open nor just closed:
    // an idle stream the client passed over (RFC 9113 5.1.1), which
    // nghttp2 would ignore. (Trailers that cross our RST_STREAM find
    // their stream among the recently closed.)
    if (hd->type == NGHTTP2_HEADERS && hd->stream_id < session.highest_stream_ && session.error_.empty() &&
        session.streams_.count(hd->stream_id) == 0 &&
        std::find(session.recently_closed_.begin(), session.recently_closed_.end(), hd->stream_id) ==
            session.recently_closed_.end()) {
      session.error_ = "HEADERS on a stream id below one already used";
      nghttp2_session_terminate_session(s, NGHTTP2_PROTOCOL_ERROR);
    }
    return 0;
  }

  static int on_frame_recv(nghttp2_session* /*s*/, const nghttp2_frame* frame, void* user_data) {
    Session& session = of(user_data);
    Stream* stream = session.find(frame->hd.stream_id);
    if (stream == nullptr) return 0;
    const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (is_request_headers(frame)) {
      session.start(*stream, end_stream);
    } else if (end_stream && (frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS)) {
      stream->body_complete_ = true;
      if (stream->paused_) return 0;  // resume_body() ends it
      session.callbacks_.on_body(*stream, {}, true);
    }
    return 0;
  }

  static int on_data_chunk(nghttp2_session* s, uint8_t /*flags*/, int32_t stream_id, const uint8_t* data,
                           size_t length, void* user_data) {
    Session& session = of(user_data);
    Stream* stream = session.find(stream_id);
    if (stream == nullptr || !stream->started_ || stream->response_sent_) {
      session.data_received_ += length;
      nghttp2_session_consume_connection(s, length);
      return 0;
    }
    if (stream->paused_) {
      // Held, not credited: the client runs out of window.
      stream->held_.append(reinterpret_cast<const char*>(data), length);
      return 0;
    }
    session.data_received_ += length;
    nghttp2_session_consume(s, stream_id, length);
    session.callbacks_.on_body(*stream, view(data, length), false);
    return 0;
  }

  // A response complete while its request is not (answered early: 408,
  // 413, a handler that needs no more): the rest of the body is read and
  // dropped, within the stream's window (no more is credited), so nghttp2
  // still checks the stream's frames; the client ends it, or the body
  // timeout does.
  static int on_frame_send(nghttp2_session* s, const nghttp2_frame* frame, void* user_data) {
    if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) return 0;
    if (frame->hd.type != NGHTTP2_DATA && frame->hd.type != NGHTTP2_HEADERS) return 0;
    Stream* stream = of(user_data).find(frame->hd.stream_id);
    if (stream == nullptr) return 0;
    stream->response_sent_ = true;
    if (stream->reset_after_response_ && !stream->body_complete_) {
      nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, stream->id_, NGHTTP2_NO_ERROR);
    }
    return 0;
  }

  static int on_stream_close(nghttp2_session* /*s*/, int32_t stream_id, uint32_t /*error_code*/,
                             void* user_data) {
    Session& session = of(user_data);
    auto it = session.streams_.find(stream_id);
    if (it == session.streams_.end()) return 0;
    std::unique_ptr<Stream> stream = std::move(it->second);
    session.streams_.erase(it);
    session.recently_closed_[session.closed_count_++ % session.recently_closed_.size()] = stream_id;
    if (stream->started_ && session.callbacks_.on_close) session.callbacks_.on_close(*stream);
    session.close_stream(std::move(stream));
    return 0;
  }

  // How much of a stream's body the next DATA frame carries. The bytes are
  // not copied here but in send_data, straight into the connection's
  // output behind the frame's header (NGHTTP2_DATA_FLAG_NO_COPY), so file
  // data is copied once on its way out, not into nghttp2's frame first.
  static ssize_t read_body(nghttp2_session* /*s*/, int32_t /*stream_id*/, uint8_t* /*out*/, size_t length,
                           uint32_t* data_flags, nghttp2_data_source* source, void* /*user_data*/) {
    Stream& stream = *static_cast<Stream*>(source->ptr);
    const size_t n = std::min(length, stream.queued_);
    if (n == stream.queued_ && stream.ended_) {
      *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    } else if (n == 0) {
      stream.deferred_ = true;
      return NGHTTP2_ERR_DEFERRED;
    }
    if (n > 0) *data_flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    return static_cast<ssize_t>(n);
  }

  static int send_data(nghttp2_session* /*s*/, nghttp2_frame* frame, const uint8_t* header, size_t length,
                       nghttp2_data_source* source, void* user_data) {
    Session& session = *static_cast<Session*>(user_data);
    Stream& stream = *static_cast<Stream*>(source->ptr);
    TERN_DCHECK(session.out_ != nullptr && frame->data.padlen == 0);  // no padding is chosen
    net::Buffer& out = *session.out_;
    out.ensure_writable(kFrameHeader + length);
    // The body first: if a file cannot be read, nothing of the frame is
    // written and nghttp2 resets the stream instead.
    auto* body = reinterpret_cast<uint8_t*>(out.begin_write()) + kFrameHeader;
    if (stream.fill(body, length) != static_cast<long>(length)) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    std::memcpy(out.begin_write(), header, kFrameHeader);
    out.has_written(kFrameHeader + length);
    session.data_sent_ += length;
    // The rest waits for the next send(): its budget is spent.
    return out.readable_bytes() >= session.out_limit_ ? NGHTTP2_ERR_PAUSE : 0;
  }
};

// ---- Session ----

Stream* Session::open_stream(int32_t id) {
  std::unique_ptr<Stream> stream;
  if (spare_streams_.empty()) {
    stream.reset(new Stream(this, id));
  } else {
    stream = std::move(spare_streams_.back());
    spare_streams_.pop_back();
    stream->recycle(id);
  }
  Stream* raw = stream.get();
  streams_.emplace(id, std::move(stream));
  return raw;
}

void Session::close_stream(std::unique_ptr<Stream> stream) {
  if (spare_streams_.size() < limits_.max_concurrent_streams) spare_streams_.push_back(std::move(stream));
}

Session::Session(const SessionLimits& limits, Callbacks callbacks)
    : limits_(limits),
      callbacks_(std::move(callbacks)),
      parser_(limits.parser),
      control_tokens_(limits.control_burst),
      control_filled_(std::chrono::steady_clock::now()) {
  nghttp2_session_callbacks* glue = nullptr;
  TERN_CHECK(nghttp2_session_callbacks_new(&glue) == 0);
  nghttp2_session_callbacks_set_on_begin_frame_callback(glue, &Glue::on_begin_frame);
  nghttp2_session_callbacks_set_on_begin_headers_callback(glue, &Glue::on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(glue, &Glue::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(glue, &Glue::on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(glue, &Glue::on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(glue, &Glue::on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(glue, &Glue::on_frame_send);
  nghttp2_session_callbacks_set_send_data_callback(glue, &Glue::send_data);
  nghttp2_option* options = nullptr;
  TERN_CHECK(nghttp2_option_new(&options) == 0);
  // Request bodies are credited as handlers take them (pause_body).
  nghttp2_option_set_no_auto_window_update(options, 1);
  // Resets are counted with the other control frames (charge_control_frame),
  // which ends a flood with ENHANCE_YOUR_CALM; nghttp2's own limit (which
  // says INTERNAL_ERROR) stays behind it as a second line.
  nghttp2_option_set_stream_reset_rate_limit(options, 2 * uint64_t{limits_.control_burst},
                                             2 * uint64_t{limits_.control_rate});
  const int made = nghttp2_session_server_new2(&session_, glue, this, options);
  nghttp2_option_del(options);
  nghttp2_session_callbacks_del(glue);
  TERN_CHECK_MSG(made == 0, "nghttp2_session_server_new2 failed");

  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits_.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, limits_.stream_window},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<uint32_t>(limits_.parser.max_head_bytes)},
  };
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                        static_cast<int32_t>(limits_.connection_window));
}

Session::~Session() {
  // The streams still open end with the session.
  auto streams = std::move(streams_);
  for (auto& [id, stream] : streams) {
    if (stream->started_ && callbacks_.on_close) callbacks_.on_close(*stream);
  }
  nghttp2_session_del(session_);
}

bool Session::receive(std::string_view bytes) {
  if (fatal_code_ >= 0) return false;
  const ssize_t taken =
      nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (taken < 0) {
    // nghttp2 gives up on the session (it has sent its own GOAWAY for the
    // errors it can go on from): ours says why, and nothing else goes out.
    error_ = nghttp2_strerror(static_cast<int>(taken));
    switch (taken) {
      case NGHTTP2_ERR_FLOODED:  // the client does not read our ACKs
      case NGHTTP2_ERR_TOO_MANY_CONTINUATIONS:
        fatal_code_ = NGHTTP2_ENHANCE_YOUR_CALM;
        break;
      case NGHTTP2_ERR_BAD_CLIENT_MAGIC:
        fatal_code_ = NGHTTP2_PROTOCOL_ERROR;
        break;
      default:
        fatal_code_ = NGHTTP2_INTERNAL_ERROR;
    }
    return false;
  }
  return true;
}

void Session::send(net::Buffer& out, size_t budget) {
  if (fatal_code_ >= 0) {
    if (fatal_sent_) return;
    // GOAWAY (RFC 9113 6.8): last stream id, error code.
    const uint32_t last = static_cast<uint32_t>(nghttp2_session_get_last_proc_stream_id(session_));
    const uint32_t code = static_cast<uint32_t>(fatal_code_);
    const uint8_t frame[17] = {0, 0, 8, NGHTTP2_GOAWAY, 0, 0, 0, 0, 0,
                               static_cast<uint8_t>(last >> 24 & 0x7f), static_cast<uint8_t>(last >> 16),
                               static_cast<uint8_t>(last >> 8), static_cast<uint8_t>(last),
                               static_cast<uint8_t>(code >> 24), static_cast<uint8_t>(code >> 16),
                               static_cast<uint8_t>(code >> 8), static_cast<uint8_t>(code)};
    out.append(frame, sizeof frame);
    fatal_sent_ = true;
    return;
  }
  // DATA frames are written into `out` by Glue::send_data, the other
  // frames are copied from nghttp2's.
  out_ = &out;
  out_limit_ = budget >= SIZE_MAX - out.readable_bytes() ? SIZE_MAX : out.readable_bytes() + budget;
  while (out.readable_bytes() < out_limit_) {
    const uint8_t* data = nullptr;
    const ssize_t length = nghttp2_session_mem_send(session_, &data);
    if (length <= 0) {
      if (length < 0) error_ = nghttp2_strerror(static_cast<int>(length));
      break;
    }
    out.append(data, static_cast<size_t>(length));
  }
  out_ = nullptr;
  // Producers waiting for their streams to drain (collected first: a
  // callback may write, or reset a stream).
  std::vector<int32_t> drained;
  for (auto& [id, stream] : streams_) {
    if (stream->waiting_drain_ && stream->queued_ < limits_.stream_high_water) drained.push_back(id);
  }
  for (int32_t id : drained) {
    Stream* stream = find(id);
    if (stream == nullptr) continue;
    stream->waiting_drain_ = false;
    if (callbacks_.on_drained) callbacks_.on_drained(*stream);
  }
}

bool Session::wants_to_send() const {
  if (fatal_code_ >= 0) return !fatal_sent_;
  return nghttp2_session_want_write(session_) != 0;
}

bool Session::done() const {
  if (fatal_code_ >= 0) return fatal_sent_;
  return nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0;
}

void Session::shutdown() {
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(session_),
                        NGHTTP2_NO_ERROR, nullptr, 0);
}

bool Session::charge_control_frame() {
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - control_filled_).count();
  control_tokens_ = std::min<double>(limits_.control_burst, control_tokens_ + seconds * limits_.control_rate);
  control_filled_ = now;
  if (control_tokens_ < 1) return false;
  control_tokens_ -= 1;
  return true;
}

size_t Session::queued_bytes() const {
  size_t total = 0;
  for (const auto& [id, stream] : streams_) total += stream->queued_;
  return total;
}

Stream* Session::find(int32_t id) {
  auto it = streams_.find(id);
  return it != streams_.end() ? it->second.get() : nullptr;
}


nghttp2_data_provider Session::body_provider(Stream& stream) {
  nghttp2_data_provider body{};
  body.source.ptr = &stream;
  body.read_callback = &Glue::read_body;
  return body;
}

void Session::resume(Stream& stream) {
  if (!stream.deferred_) return;
  stream.deferred_ = false;
  nghttp2_session_resume_data(session_, stream.id_);
}

}  // namespace tern::http2
