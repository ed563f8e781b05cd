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
// The least a DATA frame carries when send()'s budget is nearly spent.
constexpr size_t kSmallestDataFrame = 4096;

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
    Session& session = of(user_data);
    session.block_bytes_ = 0;
    if (!is_request_headers(frame)) return 0;
    const int32_t id = frame->hd.stream_id;
    session.open_stream(id);
    session.highest_stream_ = std::max(session.highest_stream_, id);
    return 0;
  }

  static int on_header(nghttp2_session* /*s*/, const nghttp2_frame* frame, const uint8_t* name_data,
                       size_t name_length, const uint8_t* value_data, size_t value_length, uint8_t /*flags*/,
                       void* user_data) {
    Session& session = of(user_data);
    // What a header block may decode to is bounded, counted as RFC 9113
    // sizes a field list (trailers too). An HPACK bomb names a large entry
    // of the dynamic table again and again, a byte each: nghttp2 would
    // copy and check every field for us to throw away. Past the head limit
    // decoding stops there, and the connection ends (as nginx ends it).
    session.block_bytes_ += name_length + value_length + 32;
    if (session.block_bytes_ > session.limits_.parser.max_head_bytes) {
      session.error_ = "a header block decodes past the head limit";
      session.fatal_code_ = NGHTTP2_ENHANCE_YOUR_CALM;
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    // Trailers (a second HEADERS) are not passed on.
    if (!is_request_headers(frame)) return 0;
    Stream* stream = session.find(frame->hd.stream_id);
    if (stream == nullptr) return 0;
    const std::string_view name = view(name_data, name_length);
    const std::string_view value = view(value_data, value_length);
    // nghttp2 has checked the names and values (no CR, LF or NUL, lower
    // case) and put the pseudo-fields first.
    if (name.starts_with(':')) {
      if (name == ":method") stream->req_->method = value;
      if (name == ":path") stream->req_->path = value;
      if (name == ":authority") stream->req_->authority = value;
      if (name == ":scheme") stream->req_->scheme = value;
      return 0;
    }
    std::string& text = stream->req_->head_text;
    if (name == "cookie") {
      // Split into several fields to compress better (RFC 9113 8.2.3); one
      // for HTTP/1 handlers.
      if (!stream->req_->cookies.empty()) stream->req_->cookies += "; ";
      stream->req_->cookies += value;
      return 0;
    }
    if (name == "host" && !stream->req_->authority.empty()) return 0;  // :authority wins
    if (name == "content-length") stream->req_->has_length_field = true;
    text.append(name).append(": ").append(value).append("\r\n");
    return 0;
  }

  // Every frame's header, before nghttp2 looks further (so frames it
  // would ignore, on a closed stream say, are counted too).
  static int on_begin_frame(nghttp2_session* s, const nghttp2_frame_hd* hd, void* user_data) {
    Session& session = of(user_data);
    if (session.replaying_) return 0;  // counted when they came
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
      // Handed over once the read is through (start_waiting).
      stream->started_ = stream->waiting_start_ = true;
      stream->body_complete_ = end_stream;
      session.starts_.push_back(stream->id_);
    } else if (end_stream && (frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS)) {
      if (stream->waiting_start_) {
        // Its head is read as one that a body follows: the end comes with
        // the body held (deliver_held).
        stream->end_held_ = true;
        return 0;
      }
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
    if (stream->paused_ || stream->waiting_start_) {
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
    if (stream->handed_over() && session.callbacks_.on_close) session.callbacks_.on_close(*stream);
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

  // A DATA frame no longer than what is left of send()'s budget (a few KiB
  // at least, so that frames stay worth their header): what waits in the
  // output for a client that does not read is bounded by the budget.
  static ssize_t data_length(nghttp2_session* /*s*/, uint8_t /*type*/, int32_t /*stream_id*/,
                             int32_t connection_window, int32_t stream_window, uint32_t max_frame, void* user_data) {
    const Session& session = of(user_data);
    const size_t queued = session.out_ != nullptr ? session.out_->readable_bytes() : 0;
    const size_t left = session.out_limit_ > queued ? session.out_limit_ - queued : 0;
    const size_t most = std::min({size_t{max_frame}, static_cast<size_t>(std::max(connection_window, 1)),
                                  static_cast<size_t>(std::max(stream_window, 1))});
    return static_cast<ssize_t>(std::min(most, std::max(left, kSmallestDataFrame)));
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
  if (spare_streams_.size() < kSpareStreams) spare_streams_.push_back(std::move(stream));
}

Session::Session(const SessionLimits& limits, Callbacks callbacks)
    : limits_(limits),
      callbacks_(std::move(callbacks)),
      parser_(limits.parser),
      control_tokens_(limits.control_burst),
      control_filled_(std::chrono::steady_clock::now()) {}

void Session::make_nghttp2_session() {
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
  nghttp2_session_callbacks_set_data_source_read_length_callback(glue, &Glue::data_length);
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
    if (stream->handed_over() && callbacks_.on_close) callbacks_.on_close(*stream);
  }
  nghttp2_session_del(session_);
}

bool Session::receive(std::string_view bytes) {
  if (fatal_code_ >= 0) return false;
  if (session_ != nullptr) return feed(bytes);
  // Asleep: answered by hand while it can be (session_heads.cc).
  if (asleep_.in.size() + bytes.size() <= kAsleepBytes) {
    asleep_.in.append(bytes);
    if (answer_asleep()) return fatal_code_ < 0;
    bytes = {};  // in asleep_.in
  }
  const std::string rest = wake();
  return fatal_code_ < 0 && feed(rest) && (bytes.empty() || feed(bytes));
}

bool Session::feed(std::string_view bytes) {
  if (bytes.empty()) return true;
  const size_t passed = scan(bytes);
  const ssize_t taken =
      nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(bytes.data()), passed);
  const bool ok = after_read(taken, passed < bytes.size());
  start_waiting();
  return ok;
}

bool Session::after_read(ssize_t taken, bool cut) {
  if (taken >= 0 && cut) {
    error_ = "a header block larger than the head limit";
    fatal_code_ = NGHTTP2_ENHANCE_YOUR_CALM;
    return false;
  }
  if (taken < 0) {
    // A callback ended it, and said why.
    if (fatal_code_ >= 0) return false;
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
    const int32_t last = session_ != nullptr ? nghttp2_session_get_last_proc_stream_id(session_) : 0;
    out.append(goaway_frame(last, static_cast<uint32_t>(fatal_code_)));
    fatal_sent_ = true;
    return;
  }
  // Answers made by hand (asleep, or before waking) go first.
  if (session_ == nullptr) return send_asleep(out);
  if (!asleep_.out.empty()) {
    out.append(asleep_.out);
    std::string().swap(asleep_.out);
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
  if (session_ == nullptr) return !asleep_.greeted || !asleep_.out.empty();
  return !asleep_.out.empty() || nghttp2_session_want_write(session_) != 0;
}

bool Session::done() const {
  if (fatal_code_ >= 0) return fatal_sent_;
  if (session_ == nullptr) return asleep_.gone && asleep_.out.empty();
  return asleep_.out.empty() && nghttp2_session_want_read(session_) == 0 &&
         nghttp2_session_want_write(session_) == 0;
}

void Session::shutdown() {
  if (session_ == nullptr) {
    // No stream was ever opened: the GOAWAY says so.
    if (!asleep_.gone) asleep_.out.append(goaway_frame(0, NGHTTP2_NO_ERROR));
    asleep_.gone = true;
    return;
  }
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(session_),
                        NGHTTP2_NO_ERROR, nullptr, 0);
}

// The streams whose heads came in the last read, handed over now that it
// is through: a stream the client reset in the same read (a rapid reset)
// costs nghttp2's decoding and no more. A connection that is ending starts
// none.
void Session::start_waiting() {
  if (fatal_code_ >= 0 || !error_.empty()) starts_.clear();
  for (const int32_t id : starts_) {
    Stream* stream = find(id);
    if (stream == nullptr || !stream->waiting_start_) continue;
    stream->waiting_start_ = false;
    start(*stream);
    stream = find(id);  // (a handler resets a stream by asking nghttp2: it is still here)
    if (stream != nullptr && !stream->paused_) stream->deliver_held();
  }
  starts_.clear();
  if (starts_.capacity() > kKeptStarts) std::vector<int32_t>().swap(starts_);
}

void Session::release_spares() {
  std::vector<std::unique_ptr<Stream>>().swap(spare_streams_);
  head_scratch_ = HeadScratch{};
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
