#include "http2/frame_writer.h"

#include <algorithm>
#include <cstring>

#include "base/assert.h"

namespace tern::http2 {
namespace {

// Room for a frame of `length` payload bytes; returns where its header goes.
// The caller calls has_written() once the frame is complete.
char* reserve(net::Buffer& out, size_t length) {
  out.ensure_writable(kFrameHeaderSize + length);
  return out.begin_write();
}

// A frame whose payload is `fixed` (up to 8 bytes already encoded) plus
// `tail`.
void write_small(net::Buffer& out, FrameType type, uint8_t flags, uint32_t stream_id,
                 const char* fixed, size_t fixed_size, std::string_view tail = {}) {
  const size_t length = fixed_size + tail.size();
  TERN_DCHECK(length <= kMaxFrameSizeLimit);
  char* p = store_frame_header(reserve(out, length), static_cast<uint32_t>(length), type, flags, stream_id);
  if (fixed_size > 0) std::memcpy(p, fixed, fixed_size);
  if (!tail.empty()) std::memcpy(p + fixed_size, tail.data(), tail.size());
  out.has_written(kFrameHeaderSize + length);
}

// A header block as `type` (HEADERS or PUSH_PROMISE, its first payload bytes
// `prefix`) plus CONTINUATION frames, each payload at most max_frame_size.
// One ensure_writable for all of it: a block is copied once, into place.
void write_block(net::Buffer& out, FrameType type, uint8_t flags, uint32_t stream_id,
                 std::string_view prefix, std::string_view block, uint32_t max_frame_size) {
  TERN_DCHECK(stream_id != 0 && max_frame_size > prefix.size());
  const size_t first = std::min<size_t>(block.size(), max_frame_size - prefix.size());
  const size_t rest = block.size() - first;
  const size_t continuations = (rest + max_frame_size - 1) / max_frame_size;
  const size_t total = kFrameHeaderSize * (1 + continuations) + prefix.size() + block.size();
  out.ensure_writable(total);
  char* p = out.begin_write();
  if (continuations == 0) flags |= kFlagEndHeaders;
  p = store_frame_header(p, static_cast<uint32_t>(prefix.size() + first), type, flags, stream_id);
  if (!prefix.empty()) std::memcpy(p, prefix.data(), prefix.size());
  if (first > 0) std::memcpy(p + prefix.size(), block.data(), first);
  p += prefix.size() + first;
  block.remove_prefix(first);
  while (!block.empty()) {
    const size_t n = std::min<size_t>(block.size(), max_frame_size);
    const uint8_t end = n == block.size() ? kFlagEndHeaders : 0;
    p = store_frame_header(p, static_cast<uint32_t>(n), FrameType::kContinuation, end, stream_id);
    std::memcpy(p, block.data(), n);
    p += n;
    block.remove_prefix(n);
  }
  out.has_written(total);
}

}  // namespace

void write_frame_header(net::Buffer& out, uint32_t length, FrameType type, uint8_t flags,
                        uint32_t stream_id) {
  TERN_DCHECK(length <= kMaxFrameSizeLimit);
  out.ensure_writable(kFrameHeaderSize);
  store_frame_header(out.begin_write(), length, type, flags, stream_id);
  out.has_written(kFrameHeaderSize);
}

void write_settings(net::Buffer& out, std::span<const Setting> settings) {
  const size_t length = settings.size() * kSettingSize;
  TERN_DCHECK(length <= kDefaultMaxFrameSize);
  char* p = store_frame_header(reserve(out, length), static_cast<uint32_t>(length), FrameType::kSettings, 0, 0);
  for (const Setting& s : settings) p = store_u32(store_u16(p, static_cast<uint16_t>(s.id)), s.value);
  out.has_written(kFrameHeaderSize + length);
}

void write_settings_ack(net::Buffer& out) { write_frame_header(out, 0, FrameType::kSettings, kFlagAck, 0); }

void write_ping(net::Buffer& out, uint64_t opaque, bool ack) {
  char payload[8];
  store_u64(payload, opaque);
  write_small(out, FrameType::kPing, ack ? kFlagAck : 0, 0, payload, sizeof payload);
}

void write_goaway(net::Buffer& out, uint32_t last_stream_id, ErrorCode code, std::string_view debug) {
  TERN_DCHECK(last_stream_id <= kStreamIdMask);
  char payload[8];
  store_u32(store_u32(payload, last_stream_id), static_cast<uint32_t>(code));
  write_small(out, FrameType::kGoaway, 0, 0, payload, sizeof payload, debug);
}

void write_rst_stream(net::Buffer& out, uint32_t stream_id, ErrorCode code) {
  TERN_DCHECK(stream_id != 0);
  char payload[4];
  store_u32(payload, static_cast<uint32_t>(code));
  write_small(out, FrameType::kRstStream, 0, stream_id, payload, sizeof payload);
}

void write_window_update(net::Buffer& out, uint32_t stream_id, uint32_t increment) {
  TERN_DCHECK(increment != 0 && increment <= kMaxWindowSize);
  char payload[4];
  store_u32(payload, increment);
  write_small(out, FrameType::kWindowUpdate, 0, stream_id, payload, sizeof payload);
}

void write_priority(net::Buffer& out, uint32_t stream_id, const Priority& priority) {
  TERN_DCHECK(stream_id != 0 && priority.weight >= 1 && priority.weight <= 256);
  char payload[kPrioritySize];
  store_u32(payload, priority.depends_on | (priority.exclusive ? 0x80000000u : 0));
  payload[4] = static_cast<char>(priority.weight - 1);
  write_small(out, FrameType::kPriority, 0, stream_id, payload, sizeof payload);
}

void write_headers(net::Buffer& out, uint32_t stream_id, std::string_view block, bool end_stream,
                   uint32_t max_frame_size) {
  write_block(out, FrameType::kHeaders, end_stream ? kFlagEndStream : 0, stream_id, {}, block,
              max_frame_size);
}

void write_push_promise(net::Buffer& out, uint32_t stream_id, uint32_t promised_stream_id,
                        std::string_view block, uint32_t max_frame_size) {
  TERN_DCHECK(promised_stream_id != 0 && promised_stream_id <= kStreamIdMask);
  char promised[4];
  store_u32(promised, promised_stream_id);
  write_block(out, FrameType::kPushPromise, 0, stream_id, {promised, sizeof promised}, block,
              max_frame_size);
}

void write_data_header(net::Buffer& out, uint32_t stream_id, uint32_t length, bool end_stream) {
  TERN_DCHECK(stream_id != 0);
  write_frame_header(out, length, FrameType::kData, end_stream ? kFlagEndStream : 0, stream_id);
}

void write_data(net::Buffer& out, uint32_t stream_id, std::string_view payload, bool end_stream) {
  TERN_DCHECK(stream_id != 0);
  write_small(out, FrameType::kData, end_stream ? kFlagEndStream : 0, stream_id, nullptr, 0, payload);
}

FrameStart begin_frame(net::Buffer& out) {
  out.ensure_writable(kFrameHeaderSize);
  out.has_written(kFrameHeaderSize);
  return {out.readable_bytes()};
}

uint32_t end_frame(net::Buffer& out, FrameStart start, FrameType type, uint8_t flags,
                   uint32_t stream_id) {
  TERN_CHECK(start.payload_at >= kFrameHeaderSize && start.payload_at <= out.readable_bytes());
  const size_t length = out.readable_bytes() - start.payload_at;
  TERN_DCHECK(length <= kMaxFrameSizeLimit);
  // begin_write() less the readable bytes is the mutable readable start.
  char* header = out.begin_write() - out.readable_bytes() + start.payload_at - kFrameHeaderSize;
  store_frame_header(header, static_cast<uint32_t>(length), type, flags, stream_id);
  return static_cast<uint32_t>(length);
}

}  // namespace tern::http2
