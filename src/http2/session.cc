// http2::Session's input: the preface, frames in order, the connection's
// and the streams' states as the client's frames change them (RFC 9113
// sections 5 and 6), and the budget of frames that ask work and carry no
// request. Header blocks are session_heads.cc's, the stream table
// session_streams.cc's, output session_output.cc's. See session.h.
#include "http2/session.h"

#include <algorithm>

#include "base/assert.h"
#include "http2/frame_writer.h"

namespace tern::http2 {
namespace {

// What a header block may carry on the wire beside its fields: padding, a
// priority, table size updates.
constexpr size_t kBlockPadding = 512;
// The CONTINUATION frames one block may take: a client that sends them
// empty, or a byte each, costs frames and no HPACK work.
constexpr uint32_t kMaxBlockFrames = 9;  // a HEADERS and 8 CONTINUATIONs
// PRIORITY_UPDATE (RFC 9218 7.1): read, counted, not acted on.
constexpr auto kPriorityUpdate = static_cast<FrameType>(0x10);

// A frame that costs the server work and carries no part of a request.
bool is_control(const FrameHeader& h) {
  if (h.type == kPriorityUpdate) return true;
  switch (h.type) {
    case FrameType::kSettings:
    case FrameType::kPing:
    case FrameType::kPriority:
    case FrameType::kRstStream:
      return true;
    case FrameType::kData:
      return h.length == 0 && !h.has(kFlagEndStream);
    default:
      return false;
  }
}

}  // namespace

Session::Session(const SessionLimits& limits, Callbacks callbacks, std::shared_ptr<StreamSpares> spares)
    : limits_(limits),
      callbacks_(std::move(callbacks)),
      decoder_(HpackDecoder::Settings{
          .table_size_limit = kDefaultHeaderTableSize,
          .max_header_list_size = static_cast<uint32_t>(limits.parser.max_head_bytes),
          .max_string_length = static_cast<uint32_t>(limits.parser.max_head_bytes),
      }),
      recv_window_(std::max<int64_t>(limits.connection_window, kDefaultInitialWindowSize)),
      control_tokens_(limits.control_burst),
      control_filled_(std::chrono::steady_clock::now()),
      spares_(spares != nullptr ? std::move(spares) : std::make_shared<StreamSpares>()) {
  greet();
}

Session::~Session() {
  // The streams still open end with the session.
  auto streams = std::move(streams_);
  streams_.clear();
  stream_ids_.clear();
  for (auto& stream : streams) {
    if (stream->handed_over() && callbacks_.on_close) callbacks_.on_close(*stream);
  }
}

bool Session::receive(std::string_view bytes) {
  if (fatal_code_ >= 0) return false;
  // Frames are read where they lie. A frame (or the preface) cut by the
  // end of a read is kept, and completed from the next read's first bytes
  // before the rest of that read is taken where it lies too.
  while (!partial_.empty() && fatal_code_ < 0) {
    const size_t want = wanted(partial_);
    const size_t take = std::min(want - partial_.size(), bytes.size());
    partial_.append(bytes.substr(0, take));
    bytes.remove_prefix(take);
    if (partial_.size() < wanted(partial_)) {
      if (!preface_done_ && match_preface(partial_) == PrefaceStatus::kMismatch) {
        read_input(partial_);  // not HTTP/2: said at its first wrong byte
        break;
      }
      if (bytes.empty()) break;
      continue;  // its header came: now its payload
    }
    const size_t used = read_input(partial_);
    partial_.erase(0, used);
  }
  if (partial_.empty() && fatal_code_ < 0) {
    const size_t used = read_input(bytes);
    partial_.assign(bytes.substr(used));
  }
  if (fatal_code_ >= 0) std::string().swap(partial_);
  start_waiting();
  check_pending();
  return fatal_code_ < 0;
}

size_t Session::wanted(std::string_view begun) const {
  if (!preface_done_) return kClientPreface.size();
  if (begun.size() < kFrameHeaderSize) return kFrameHeaderSize;
  const uint32_t length = load_u24(begun.data());
  // A frame too large: its header is enough for read_frame to say so.
  return length > kDefaultMaxFrameSize ? kFrameHeaderSize : kFrameHeaderSize + length;
}

size_t Session::read_input(std::string_view input) {
  size_t at = 0;
  if (!preface_done_) {
    switch (match_preface(input)) {
      case PrefaceStatus::kMismatch:
        fail(ErrorCode::kProtocolError, "not HTTP/2 (no client preface)");
        return input.size();
      case PrefaceStatus::kNeedMore:
        return 0;
      case PrefaceStatus::kMatch:
        preface_done_ = true;
        at = kClientPreface.size();
        break;
    }
  }
  while (fatal_code_ < 0) {
    const ReadResult r = read_frame(input.substr(at), kDefaultMaxFrameSize);
    if (r.status == ReadStatus::kNeedMore) break;
    if (r.status == ReadStatus::kError) {
      fail(r.error.code, "a frame larger than SETTINGS_MAX_FRAME_SIZE");
      return input.size();
    }
    at += r.size;
    if (!on_frame(r.frame)) return input.size();
  }
  return at;
}

bool Session::fail(ErrorCode code, std::string_view reason) {
  if (fatal_code_ < 0) {
    fatal_code_ = static_cast<int64_t>(code);
    error_ = reason;
  }
  return false;
}

bool Session::on_frame(const Frame& frame) {
  const FrameHeader& h = frame.header;
  if (FrameError e = continuation_.check(h); !e.ok()) {
    return fail(e.code, "a header block interrupted, or a CONTINUATION out of place");
  }
  if (h.type == FrameType::kHeaders || h.type == FrameType::kContinuation) {
    // A block is bounded on the wire before any of it is decoded (a field
    // takes fewer bytes there than in RFC 9113's measure, which the
    // decoder holds to the limit).
    if (continuation_.block_bytes() > limits_.parser.max_head_bytes + kBlockPadding) {
      return fail(ErrorCode::kEnhanceYourCalm, "a header block larger than the head limit");
    }
    if (continuation_.block_frames() > kMaxBlockFrames) {
      return fail(ErrorCode::kEnhanceYourCalm, "a flood of CONTINUATION frames");
    }
  }
  if (!settings_seen_) {
    if (h.type != FrameType::kSettings || h.has(kFlagAck)) {
      return fail(ErrorCode::kProtocolError, "the client's preface did not begin with SETTINGS");
    }
    settings_seen_ = true;
  }
  if (is_control(h) && !charge_control_frame()) {
    return fail(ErrorCode::kEnhanceYourCalm,
                "flood of control frames (SETTINGS, PING, PRIORITY, RST_STREAM or empty DATA)");
  }
  switch (h.type) {
    case FrameType::kData:
      return on_data(frame);
    case FrameType::kHeaders:
      return on_headers(frame);
    case FrameType::kContinuation:
      return on_continuation(frame);
    case FrameType::kSettings:
      return on_settings(frame);
    case FrameType::kRstStream:
      return on_rst_stream(frame);
    case FrameType::kWindowUpdate:
      return on_window_update(frame);
    case FrameType::kPriority: {
      PriorityFrame p;
      const FrameError e = decode_priority(frame, p);
      if (e.is_connection()) return fail(e.code, "a malformed PRIORITY frame");
      if (e.is_stream()) reset_stream(p.stream_id, e.code);
      return true;
    }
    case FrameType::kPing: {
      PingFrame p;
      if (FrameError e = decode_ping(frame, p); !e.ok()) return fail(e.code, "a malformed PING frame");
      if (!p.ack) write_ping(pending_, p.opaque, true);
      return true;
    }
    case FrameType::kGoaway: {
      GoawayFrame g;
      if (FrameError e = decode_goaway(frame, g); !e.ok()) return fail(e.code, "a malformed GOAWAY frame");
      goaway_received_ = true;  // we push nothing: the streams it took are all we have
      return true;
    }
    case FrameType::kPushPromise: {
      PushPromiseFrame p;
      const FrameError e = decode_push_promise(frame, Role::kServer, p);
      return fail(e.ok() ? ErrorCode::kProtocolError : e.code, "a client sent PUSH_PROMISE");
    }
    default:
      return true;  // an extension's frame, ignored (section 5.5)
  }
}

bool Session::on_data(const Frame& frame) {
  DataFrame d;
  const FrameError e = decode_data(frame, d);
  if (e.is_connection()) return fail(e.code, "a malformed DATA frame");
  // The connection's window counts every DATA frame, whatever its stream.
  if (d.flow_length > recv_window_) return fail(ErrorCode::kFlowControlError, "DATA past the connection's window");
  recv_window_ -= d.flow_length;
  Stream* stream = nullptr;
  switch (known(d.stream_id, &stream)) {
    case Known::kIdle:
      return fail(ErrorCode::kProtocolError, "DATA on a stream not opened");
    case Known::kClosedByPeer:
    case Known::kForgotten:
      return fail(ErrorCode::kStreamClosed, "DATA on a closed stream");
    case Known::kClosedByUs:
      credit_connection(d.flow_length);  // crossed our RST_STREAM: dropped
      return true;
    case Known::kOpen:
      break;
  }
  if (stream->reset_) {
    credit_connection(d.flow_length);
    return true;
  }
  if (stream->remote_ended_) {
    credit_connection(d.flow_length);
    reset_stream(stream->id_, ErrorCode::kStreamClosed);
    return true;
  }
  if (d.flow_length > stream->recv_window_) {
    credit_connection(d.flow_length);
    reset_stream(stream->id_, ErrorCode::kFlowControlError);
    return true;
  }
  stream->recv_window_ -= d.flow_length;
  // Padding is nobody's to take: credited at once.
  const size_t padding = d.flow_length - d.data.size();
  if (padding > 0) credit(stream, padding);
  stream->data_in_ += d.data.size();
  if (stream->expected_length_ >= 0 &&
      (stream->data_in_ > static_cast<uint64_t>(stream->expected_length_) ||
       (d.end_stream && stream->data_in_ != static_cast<uint64_t>(stream->expected_length_)))) {
    credit_connection(d.data.size());
    reset_stream(stream->id_, ErrorCode::kProtocolError);  // section 8.1.1
    return true;
  }
  if (d.end_stream) stream->remote_ended_ = true;

  if (!d.data.empty()) {
    if (!stream->started_ || stream->response_sent_) {
      // Refused from its head, or answered already: read and dropped,
      // within the stream's window (no more is credited).
      data_received_ += d.data.size();
      credit_connection(d.data.size());
    } else if (stream->paused_ || stream->waiting_start_) {
      // Held, not credited: the client runs out of window.
      stream->held_.append(d.data);
    } else {
      data_received_ += d.data.size();
      credit(stream, d.data.size());
      callbacks_.on_body(*stream, d.data, false);
    }
  }
  if (d.end_stream) body_ended(*stream);
  return true;
}

void Session::body_ended(Stream& stream) {
  stream.remote_ended_ = true;
  if (stream.waiting_start_) {
    // Its head is read as one that a body follows: the end comes with the
    // body held (deliver_held).
    stream.end_held_ = true;
  } else if (!stream.body_complete_) {
    stream.body_complete_ = true;
    if (stream.started_ && !stream.paused_ && !stream.reset_) callbacks_.on_body(stream, {}, true);
  }
  close_if_done(stream);
}

bool Session::on_headers(const Frame& frame) {
  HeadersFrame h;
  const FrameError e = decode_headers(frame, h);
  if (e.is_connection()) return fail(e.code, "a malformed HEADERS frame");
  if (!h.end_headers) {
    block_.stream_id = h.stream_id;
    block_.end_stream = h.end_stream;
    block_.stream_error = e;
    block_.bytes.assign(h.block);
    return true;
  }
  return on_block(h.stream_id, h.block, h.end_stream, e);
}

bool Session::on_continuation(const Frame& frame) {
  ContinuationFrame c;
  if (FrameError e = decode_continuation(frame, c); !e.ok()) return fail(e.code, "a malformed CONTINUATION frame");
  block_.bytes.append(c.block);
  if (!c.end_headers) return true;
  const bool ok = on_block(block_.stream_id, block_.bytes, block_.end_stream, block_.stream_error);
  block_.bytes.clear();
  if (block_.bytes.capacity() > limits_.parser.max_head_bytes) std::string().swap(block_.bytes);
  return ok;
}

bool Session::on_settings(const Frame& frame) {
  SettingsFrame s;
  if (FrameError e = decode_settings(frame, Role::kServer, s); !e.ok()) {
    return fail(e.code, "a malformed SETTINGS frame");
  }
  if (s.ack) {
    settings_acked_ = true;
    return true;
  }
  // While a head is being encoded, a change of the client's table size
  // waits for it, and so does this acknowledgement and any after it: once
  // acknowledged, the client expects the next block to open with a size
  // update, which a block encoded before the change could not carry.
  const bool wait = open_head_ != nullptr &&
                    (acks_owed_ > 0 || std::any_of(s.begin(), s.end(), [](const Setting& setting) {
                       return setting.id == SettingId::kHeaderTableSize;
                     }));
  for (const Setting setting : s) {
    switch (setting.id) {
      case SettingId::kHeaderTableSize:
        if (wait) {
          owed_table_sizes_.push_back(setting.value);
        } else {
          encoder_.set_peer_table_size(setting.value);
        }
        break;
      case SettingId::kInitialWindowSize: {
        // Section 6.9.2: every stream's window moves by the difference.
        const int64_t delta = int64_t{setting.value} - peer_initial_window_;
        peer_initial_window_ = setting.value;
        for (auto& stream : streams_) {
          stream->send_window_ += delta;
          if (stream->send_window_ > kMaxWindowSize) {
            return fail(ErrorCode::kFlowControlError, "SETTINGS_INITIAL_WINDOW_SIZE overflows a window");
          }
          if (delta > 0) make_ready(*stream);
        }
        break;
      }
      case SettingId::kMaxFrameSize:
        peer_max_frame_ = setting.value;
        break;
      case SettingId::kNoRfc7540Priorities:
        // RFC 9218 2.1: said once, never changed.
        if (no_rfc7540_priorities_ >= 0 && static_cast<uint32_t>(no_rfc7540_priorities_) != setting.value) {
          return fail(ErrorCode::kProtocolError, "SETTINGS_NO_RFC7540_PRIORITIES changed");
        }
        no_rfc7540_priorities_ = static_cast<int>(setting.value);
        break;
      default:
        break;  // the others ask nothing of a server; unknown ones are ignored
    }
  }
  if (wait) {
    ++acks_owed_;
  } else {
    write_settings_ack(pending_);
  }
  return true;
}

bool Session::on_rst_stream(const Frame& frame) {
  RstStreamFrame r;
  if (FrameError e = decode_rst_stream(frame, r); !e.ok()) return fail(e.code, "a malformed RST_STREAM frame");
  Stream* stream = nullptr;
  switch (known(r.stream_id, &stream)) {
    case Known::kIdle:
      return fail(ErrorCode::kProtocolError, "RST_STREAM on a stream not opened");
    case Known::kOpen:
      close_stream(stream, false);
      return true;
    default:
      return true;  // closed already
  }
}

bool Session::on_window_update(const Frame& frame) {
  WindowUpdateFrame w;
  const FrameError e = decode_window_update(frame, w);
  if (e.is_connection()) return fail(e.code, "a malformed WINDOW_UPDATE frame");
  if (w.stream_id == 0) {
    send_window_ += w.increment;
    if (send_window_ > kMaxWindowSize) return fail(ErrorCode::kFlowControlError, "the connection's window overflowed");
    return true;
  }
  Stream* stream = nullptr;
  switch (known(w.stream_id, &stream)) {
    case Known::kIdle:
      return fail(ErrorCode::kProtocolError, "WINDOW_UPDATE on a stream not opened");
    case Known::kOpen:
      break;
    default:
      return true;  // closed: it may have crossed the stream's end
  }
  if (e.is_stream()) {
    reset_stream(w.stream_id, e.code);
    return true;
  }
  stream->send_window_ += w.increment;
  if (stream->send_window_ > kMaxWindowSize) {
    reset_stream(w.stream_id, ErrorCode::kFlowControlError);
    return true;
  }
  make_ready(*stream);
  return true;
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

void Session::shutdown() {
  if (goaway_sent_ || fatal_code_ >= 0) return;
  goaway_sent_ = true;
  goaway_last_ = highest_stream_;
  write_goaway(pending_, highest_stream_, ErrorCode::kNoError);
}

bool Session::done() const {
  if (fatal_code_ >= 0) return fatal_sent_;
  return (goaway_sent_ || goaway_received_) && streams_.empty() && pending_.readable_bytes() == 0;
}

size_t Session::queued_bytes() const {
  size_t total = 0;
  for (const auto& stream : streams_) total += stream->queued_;
  return total;
}

void Session::release_spares() {
  if (streams_.empty()) {
    std::vector<std::unique_ptr<Stream>>().swap(streams_);
    std::vector<uint32_t>().swap(stream_ids_);
  }
  std::string().swap(names_);
  block_out_ = net::Buffer(0);
  if (pending_.readable_bytes() == 0) pending_ = net::Buffer(0);
  if (partial_.empty()) std::string().swap(partial_);
  std::vector<uint32_t>().swap(starts_);
  if (ready_front_ == ready_.size()) {
    std::vector<uint32_t>().swap(ready_);
    ready_front_ = 0;
  }
}

}  // namespace tern::http2
