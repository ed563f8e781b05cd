#include "http2/frame_reader.h"

#include "base/assert.h"

namespace tern::http2 {
namespace {

constexpr FrameError kProtocol = FrameError::connection(ErrorCode::kProtocolError);
constexpr FrameError kFrameSize = FrameError::connection(ErrorCode::kFrameSizeError);

// Takes the Pad Length byte and the padding off a DATA, HEADERS or
// PUSH_PROMISE payload; `fixed` bytes (priority, promised stream) must fit
// between them. Padding that leaves no room for them is a PROTOCOL_ERROR
// (sections 6.1, 6.2, 6.6); a payload too short for the Pad Length byte
// and the fixed fields is a FRAME_SIZE_ERROR, a connection error as every
// frame that carries a header block or counts against flow control is.
FrameError unpad(const Frame& frame, size_t fixed, std::string_view& body) {
  body = frame.payload;
  size_t pad = 0;
  if (frame.header.has(kFlagPadded)) {
    if (body.empty()) return kFrameSize;
    pad = static_cast<unsigned char>(body[0]);
    body.remove_prefix(1);
  }
  if (body.size() < fixed) return kFrameSize;
  if (pad > body.size() - fixed) return kProtocol;
  body.remove_suffix(pad);
  return {};
}

// The 5 bytes at p. A stream that depends on itself is a stream error
// (section 5.3.1).
FrameError load_priority(const char* p, uint32_t stream_id, Priority& out) {
  const uint32_t word = load_u32(p);
  out.exclusive = (word & 0x80000000u) != 0;
  out.depends_on = word & kStreamIdMask;
  out.weight = static_cast<uint16_t>(static_cast<unsigned char>(p[4]) + 1);
  if (out.depends_on == stream_id) return FrameError::stream(ErrorCode::kProtocolError);
  return {};
}

}  // namespace

FrameError decode_data(const Frame& frame, DataFrame& out) {
  TERN_DCHECK(frame.header.type == FrameType::kData);
  const FrameHeader& h = frame.header;
  if (h.stream_id == 0) return kProtocol;
  out.stream_id = h.stream_id;
  out.flow_length = h.length;
  out.end_stream = h.has(kFlagEndStream);
  if (!h.has(kFlagPadded)) {
    out.data = frame.payload;
    return {};
  }
  return unpad(frame, 0, out.data);
}

FrameError decode_headers(const Frame& frame, HeadersFrame& out) {
  TERN_DCHECK(frame.header.type == FrameType::kHeaders);
  const FrameHeader& h = frame.header;
  if (h.stream_id == 0) return kProtocol;
  out.stream_id = h.stream_id;
  out.end_stream = h.has(kFlagEndStream);
  out.end_headers = h.has(kFlagEndHeaders);
  out.has_priority = h.has(kFlagPriority);
  out.priority = Priority{};
  if (!(h.flags & (kFlagPadded | kFlagPriority))) {
    out.block = frame.payload;
    return {};
  }
  const size_t fixed = out.has_priority ? kPrioritySize : 0;
  if (FrameError e = unpad(frame, fixed, out.block); !e.ok()) return e;
  if (!out.has_priority) return {};
  const char* p = out.block.data();
  out.block.remove_prefix(kPrioritySize);
  return load_priority(p, h.stream_id, out.priority);
}

FrameError decode_priority(const Frame& frame, PriorityFrame& out) {
  TERN_DCHECK(frame.header.type == FrameType::kPriority);
  if (frame.header.stream_id == 0) return kProtocol;
  out.stream_id = frame.header.stream_id;
  // A stream error (section 6.3): PRIORITY changes no connection state.
  if (frame.payload.size() != kPrioritySize) return FrameError::stream(ErrorCode::kFrameSizeError);
  return load_priority(frame.payload.data(), out.stream_id, out.priority);
}

FrameError decode_rst_stream(const Frame& frame, RstStreamFrame& out) {
  TERN_DCHECK(frame.header.type == FrameType::kRstStream);
  if (frame.header.stream_id == 0) return kProtocol;
  if (frame.payload.size() != 4) return kFrameSize;
  out.stream_id = frame.header.stream_id;
  out.code = static_cast<ErrorCode>(load_u32(frame.payload.data()));
  return {};
}

FrameError check_setting(Setting setting, Role self) {
  switch (setting.id) {
    case SettingId::kEnablePush:
      // A server must not offer to push (section 6.5.2).
      if (setting.value > 1 || (self == Role::kClient && setting.value == 1)) return kProtocol;
      return {};
    case SettingId::kInitialWindowSize:
      if (setting.value > kMaxWindowSize) return FrameError::connection(ErrorCode::kFlowControlError);
      return {};
    case SettingId::kMaxFrameSize:
      if (setting.value < kDefaultMaxFrameSize || setting.value > kMaxFrameSizeLimit) return kProtocol;
      return {};
    case SettingId::kEnableConnectProtocol:
    case SettingId::kNoRfc7540Priorities:
      if (setting.value > 1) return kProtocol;
      return {};
    default:
      return {};
  }
}

FrameError decode_settings(const Frame& frame, Role self, SettingsFrame& out) {
  TERN_DCHECK(frame.header.type == FrameType::kSettings);
  if (frame.header.stream_id != 0) return kProtocol;
  out.ack = frame.header.has(kFlagAck);
  out.entries = frame.payload;
  if (out.ack) return frame.payload.empty() ? FrameError{} : kFrameSize;
  if (frame.payload.size() % kSettingSize != 0) return kFrameSize;
  for (Setting s : out) {
    if (FrameError e = check_setting(s, self); !e.ok()) return e;
  }
  return {};
}

FrameError decode_push_promise(const Frame& frame, Role self, PushPromiseFrame& out) {
  TERN_DCHECK(frame.header.type == FrameType::kPushPromise);
  // A client cannot push (section 8.4).
  if (self == Role::kServer) return kProtocol;
  if (frame.header.stream_id == 0) return kProtocol;
  out.stream_id = frame.header.stream_id;
  out.end_headers = frame.header.has(kFlagEndHeaders);
  if (FrameError e = unpad(frame, 4, out.block); !e.ok()) return e;
  out.promised_stream_id = load_u32(out.block.data()) & kStreamIdMask;
  out.block.remove_prefix(4);
  // Stream 0 can never be promised; whether the id is the next one the
  // server may use is the connection's to check.
  if (out.promised_stream_id == 0) return kProtocol;
  return {};
}

FrameError decode_ping(const Frame& frame, PingFrame& out) {
  TERN_DCHECK(frame.header.type == FrameType::kPing);
  if (frame.header.stream_id != 0) return kProtocol;
  if (frame.payload.size() != 8) return kFrameSize;
  out.ack = frame.header.has(kFlagAck);
  out.opaque = load_u64(frame.payload.data());
  return {};
}

FrameError decode_goaway(const Frame& frame, GoawayFrame& out) {
  TERN_DCHECK(frame.header.type == FrameType::kGoaway);
  if (frame.header.stream_id != 0) return kProtocol;
  if (frame.payload.size() < 8) return kFrameSize;
  out.last_stream_id = load_u32(frame.payload.data()) & kStreamIdMask;
  out.code = static_cast<ErrorCode>(load_u32(frame.payload.data() + 4));
  out.debug = frame.payload.substr(8);
  return {};
}

FrameError decode_window_update(const Frame& frame, WindowUpdateFrame& out) {
  TERN_DCHECK(frame.header.type == FrameType::kWindowUpdate);
  if (frame.payload.size() != 4) return kFrameSize;
  out.stream_id = frame.header.stream_id;
  out.increment = load_u32(frame.payload.data()) & kStreamIdMask;
  if (out.increment == 0) return out.stream_id == 0 ? kProtocol : FrameError::stream(ErrorCode::kProtocolError);
  return {};
}

FrameError decode_continuation(const Frame& frame, ContinuationFrame& out) {
  TERN_DCHECK(frame.header.type == FrameType::kContinuation);
  if (frame.header.stream_id == 0) return kProtocol;
  out.stream_id = frame.header.stream_id;
  out.block = frame.payload;
  out.end_headers = frame.header.has(kFlagEndHeaders);
  return {};
}

}  // namespace tern::http2
