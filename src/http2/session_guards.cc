// http2::Session's guards on what a client sends, ahead of nghttp2: the
// size of a header block on the wire (scan), the budget of frames that ask
// work and carry no request (charge_control_frame), and the GOAWAY that
// ends a connection past them. See session.h.
#include "http2/session.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>

namespace tern::http2 {
namespace {

// A frame's header: length, type, flags, stream id (RFC 9113 4.1).
constexpr size_t kFrameHeader = 9;
// What a header block may carry on the wire beside its fields: padding, a
// priority, table size updates.
constexpr size_t kBlockPadding = 512;

}  // namespace

// A header block larger on the wire than the head limit decodes past it
// (a field takes fewer bytes on the wire than in RFC 9113's measure, which
// on_header holds to the limit). Such a block is stopped here, before
// nghttp2 decodes any of it: where nghttp2 decodes a block only to keep its
// table (on a refused or closed stream) no on_header is called to stop it,
// nor on_begin_frame for its CONTINUATION frames.
size_t Session::scan(std::string_view bytes) {
  size_t at = 0;
  if (scan_.preface > 0) {
    const size_t n = std::min(scan_.preface, bytes.size());
    scan_.preface -= n;
    at = n;
  }
  while (at < bytes.size()) {
    if (scan_.payload > 0) {
      const size_t n = std::min(scan_.payload, bytes.size() - at);
      scan_.payload -= n;
      at += n;
      continue;
    }
    const size_t n = std::min(kFrameHeader - scan_.have, bytes.size() - at);
    std::memcpy(scan_.header + scan_.have, bytes.data() + at, n);
    scan_.have += n;
    at += n;
    if (scan_.have < kFrameHeader) break;
    scan_.have = 0;
    const uint8_t* h = scan_.header;
    scan_.payload = size_t{h[0]} << 16 | size_t{h[1]} << 8 | h[2];
    if (h[3] == NGHTTP2_HEADERS) {
      scan_.block = scan_.payload;
    } else if (h[3] == NGHTTP2_CONTINUATION) {
      scan_.block += scan_.payload;
    } else {
      continue;
    }
    // Up to the start of this frame (nghttp2 may have had the first bytes
    // of its header, which decode nothing).
    if (scan_.block > limits_.parser.max_head_bytes + kBlockPadding) return at < kFrameHeader ? 0 : at - kFrameHeader;
  }
  return bytes.size();
}

std::string Session::goaway_frame(int32_t last_stream, uint32_t code) {
  const auto last = static_cast<uint32_t>(last_stream);
  const char frame[17] = {0, 0, 8, NGHTTP2_GOAWAY, 0, 0, 0, 0, 0,
                          static_cast<char>(last >> 24 & 0x7f), static_cast<char>(last >> 16),
                          static_cast<char>(last >> 8), static_cast<char>(last),
                          static_cast<char>(code >> 24), static_cast<char>(code >> 16),
                          static_cast<char>(code >> 8), static_cast<char>(code)};
  return std::string(frame, sizeof frame);
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

}  // namespace tern::http2
