// Writing HTTP/2 frames (RFC 9113 section 6) straight into the output
// net::Buffer: each function makes room once and stores the header and the
// payload in place, with no intermediate copy and no allocation beyond the
// buffer's own growth.
//
//   write_settings(out, {{SettingId::kMaxConcurrentStreams, 100}});
//   write_headers(out, stream_id, block, /*end_stream=*/false, peer_max_frame_size);
//   write_data_header(out, stream_id, n, /*end_stream=*/true);  // then n bytes: pread, a body
//
// A body whose size is known only once it is written goes between
// begin_frame() and end_frame(), which fills in the header reserved first.
//
// The caller keeps to the RFC's limits: a payload no larger than the peer's
// SETTINGS_MAX_FRAME_SIZE (write_headers splits a block at it), stream ids
// and increments below 2^31, flow-control windows. Breaking one is a bug,
// checked by TERN_DCHECK. We never pad: padding hides sizes from an
// observer, which TLS record padding does better.
//
// Free functions over a caller's Buffer; loop thread only (the Buffer's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

#include "http2/frame.h"
#include "net/buffer.h"

namespace tern::http2 {

// A frame header alone; the payload follows from the caller.
void write_frame_header(net::Buffer& out, uint32_t length, FrameType type, uint8_t flags,
                        uint32_t stream_id);

void write_settings(net::Buffer& out, std::span<const Setting> settings);
inline void write_settings(net::Buffer& out, std::initializer_list<Setting> settings) {
  write_settings(out, std::span<const Setting>(settings.begin(), settings.size()));
}
void write_settings_ack(net::Buffer& out);
void write_ping(net::Buffer& out, uint64_t opaque, bool ack);
// debug: opaque diagnostic bytes for the peer's logs (section 6.8); keep it
// short, it must fit one frame.
void write_goaway(net::Buffer& out, uint32_t last_stream_id, ErrorCode code,
                  std::string_view debug = {});
void write_rst_stream(net::Buffer& out, uint32_t stream_id, ErrorCode code);
// stream_id 0 credits the connection's window.
void write_window_update(net::Buffer& out, uint32_t stream_id, uint32_t increment);
void write_priority(net::Buffer& out, uint32_t stream_id, const Priority& priority);

// An HPACK-encoded block as a HEADERS frame and as many CONTINUATION frames
// as max_frame_size (the peer's SETTINGS_MAX_FRAME_SIZE) makes it take:
// END_STREAM on the HEADERS frame, END_HEADERS on the last frame. The block
// must not point into `out`.
void write_headers(net::Buffer& out, uint32_t stream_id, std::string_view block, bool end_stream,
                   uint32_t max_frame_size);
// The same for PUSH_PROMISE, whose first frame also carries the promised id.
void write_push_promise(net::Buffer& out, uint32_t stream_id, uint32_t promised_stream_id,
                        std::string_view block, uint32_t max_frame_size);

// A DATA frame's 9-byte header, for a payload of `length` bytes the caller
// writes right after it (from a file with pread, from a body Buffer).
void write_data_header(net::Buffer& out, uint32_t stream_id, uint32_t length, bool end_stream);
// A DATA frame with its payload (no larger than the peer's max frame size).
void write_data(net::Buffer& out, uint32_t stream_id, std::string_view payload, bool end_stream);

// A frame whose payload length is known only once it is written:
//
//   FrameStart start = begin_frame(out);   // reserves the 9 header bytes
//   ...append the payload to out...
//   end_frame(out, start, FrameType::kData, 0, stream_id);
//
// Nothing may be retrieved from `out` in between: the header's place is
// kept as an offset from the buffer's readable start, which growth keeps.
struct FrameStart {
  size_t payload_at = 0;  // offset of the payload from out.peek()
};
FrameStart begin_frame(net::Buffer& out);
// Fills in the reserved header; returns the payload length it wrote.
uint32_t end_frame(net::Buffer& out, FrameStart start, FrameType type, uint8_t flags,
                   uint32_t stream_id);

}  // namespace tern::http2
