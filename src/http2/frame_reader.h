// Reading HTTP/2 frames (RFC 9113 sections 4 and 6) without copying them.
//
// Two steps. read_frame() finds the next frame at the start of the
// connection's input (the readable bytes of its net::Buffer, however they
// arrived): a header and a view of the payload inside that input, or "need
// more bytes", or FRAME_SIZE_ERROR as soon as a header announces more than
// our limit, so the caller can send GOAWAY without buffering 16 MiB. Then
// the decode_*() function for the frame's type checks the payload's layout
// and returns the frame's fields, views into the same input:
//
//   for (;;) {
//     ReadResult r = read_frame(in.view(), max_frame_size);
//     if (r.status == ReadStatus::kNeedMore) break;   // wait for the socket
//     if (r.status == ReadStatus::kError) return goaway(r.error.code);
//     if (FrameError e = sequence.check(r.frame.header); !e.ok()) return goaway(e.code);
//     switch (r.frame.header.type) {
//       case FrameType::kData: { DataFrame d; FrameError e = decode_data(r.frame, d); ... }
//       ...
//       default: break;                                 // unknown types are ignored
//     }
//     in.retrieve(r.size);                              // the views die here
//   }
//
// What is checked here, and what is the connection's. Framing checks need
// nothing but the frame: the size limit, each type's length and padding,
// which types may (or must) use stream 0, the range of SETTINGS values, a
// zero WINDOW_UPDATE, a stream depending on itself, PUSH_PROMISE sent to a
// server; and, through ContinuationCheck, that a header block's
// CONTINUATION frames follow it with nothing in between (section 6.10),
// which needs one stream id of state. The connection checks everything
// that needs stream or connection state: which frames a stream's state
// allows (section 5.1), new stream ids increasing and odd, SETTINGS first
// after the preface, flow-control windows (a WINDOW_UPDATE past 2^31-1, a
// DATA frame past the window), the header block's size and its HPACK
// decoding, floods of small frames, and the settings whose rules span
// frames (SETTINGS_ENABLE_CONNECT_PROTOCOL 1 then 0, a changed
// SETTINGS_NO_RFC7540_PRIORITIES, PUSH_PROMISE after ENABLE_PUSH 0).
//
// Errors. Each decoder returns FrameError: ok, a stream error (RST_STREAM
// the frame's stream, keep the connection) or a connection error (GOAWAY).
// Stream-id rules are checked first, then lengths, then values. After a
// connection error `out` is unspecified. After a stream error `out` is
// complete: a HEADERS frame's block must still go through the HPACK decoder
// (section 4.3), or the connection's compression state drifts.
//
// Flags a type does not define are ignored (section 4.1), and so is the
// reserved bit of every stream id.
//
// Pure functions over views, and ContinuationCheck, one per connection:
// loop thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>

#include "http2/frame.h"

namespace tern::http2 {

// A frame as it lies in the input.
struct Frame {
  FrameHeader header;
  std::string_view payload;  // inside the input given to read_frame
};

enum class ReadStatus : uint8_t { kFrame, kNeedMore, kError };

struct ReadResult {
  ReadStatus status = ReadStatus::kNeedMore;
  // kFrame: the frame. kError, or kNeedMore once 9 bytes are in: the header,
  // and no payload.
  Frame frame;
  // kFrame: the bytes to consume (header and payload). kNeedMore: the bytes
  // the frame needs in all (kFrameHeaderSize until the header is in), so the
  // caller can make room for it at once.
  size_t size = kFrameHeaderSize;
  // kError: a connection FRAME_SIZE_ERROR (section 4.2: a frame too large
  // to read cannot be skipped without reading it).
  FrameError error;
};

// The frame at the start of `input`. max_frame_size is the largest
// SETTINGS_MAX_FRAME_SIZE we have advertised (kDefaultMaxFrameSize before
// any): until the peer acknowledges a raise it may only send less, so
// accepting the raised size early refuses nothing legal. Inline: a read is
// a few compares past the 9-byte header.
inline ReadResult read_frame(std::string_view input, uint32_t max_frame_size) {
  ReadResult r;
  if (input.size() < kFrameHeaderSize) return r;
  r.frame.header = load_frame_header(input.data());
  if (r.frame.header.length > max_frame_size) {
    r.status = ReadStatus::kError;
    r.error = FrameError::connection(ErrorCode::kFrameSizeError);
    return r;
  }
  r.size = kFrameHeaderSize + r.frame.header.length;
  if (input.size() < r.size) return r;
  r.status = ReadStatus::kFrame;
  r.frame.payload = input.substr(kFrameHeaderSize, r.frame.header.length);
  return r;
}

struct DataFrame {
  uint32_t stream_id = 0;
  std::string_view data;  // padding removed
  // The whole payload, padding and pad length included: what flow control
  // counts (section 6.1), even when data is empty.
  uint32_t flow_length = 0;
  bool end_stream = false;
};

struct HeadersFrame {
  uint32_t stream_id = 0;
  std::string_view block;  // this frame's fragment of the HPACK block
  bool end_stream = false;
  bool end_headers = false;
  bool has_priority = false;
  Priority priority;  // when has_priority
};

struct PriorityFrame {
  uint32_t stream_id = 0;
  Priority priority;
};

struct RstStreamFrame {
  uint32_t stream_id = 0;
  ErrorCode code = ErrorCode::kNoError;
};

// The entries of a SETTINGS frame, in order (a later value overrides an
// earlier one, and HPACK needs the smallest table size among them), every
// known one checked. Unknown identifiers are kept for the caller to ignore
// (section 6.5.2).
struct SettingsFrame {
  // Yields Setting values (read on the fly from the 6 bytes).
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Setting;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Setting;

    Iterator() = default;
    explicit Iterator(const char* at) : at_(at) {}
    Setting operator*() const { return {static_cast<SettingId>(load_u16(at_)), load_u32(at_ + 2)}; }
    Iterator& operator++() {
      at_ += kSettingSize;
      return *this;
    }
    Iterator operator++(int) {
      Iterator before = *this;
      ++*this;
      return before;
    }
    friend bool operator==(const Iterator&, const Iterator&) = default;

   private:
    const char* at_ = nullptr;
  };

  bool ack = false;
  std::string_view entries;  // kSettingSize bytes each

  size_t size() const { return entries.size() / kSettingSize; }
  Iterator begin() const { return Iterator(entries.data()); }
  Iterator end() const { return Iterator(entries.data() + entries.size()); }
};

struct PushPromiseFrame {
  uint32_t stream_id = 0;
  uint32_t promised_stream_id = 0;
  std::string_view block;
  bool end_headers = false;
};

struct PingFrame {
  uint64_t opaque = 0;  // the 8 bytes, big-endian; an answer echoes them
  bool ack = false;
};

struct GoawayFrame {
  uint32_t last_stream_id = 0;
  ErrorCode code = ErrorCode::kNoError;
  std::string_view debug;
};

struct WindowUpdateFrame {
  uint32_t stream_id = 0;
  uint32_t increment = 0;  // 1..2^31-1
};

struct ContinuationFrame {
  uint32_t stream_id = 0;
  std::string_view block;
  bool end_headers = false;
};

// One per frame type; `frame.header.type` must be that type.
FrameError decode_data(const Frame& frame, DataFrame& out);
FrameError decode_headers(const Frame& frame, HeadersFrame& out);
FrameError decode_priority(const Frame& frame, PriorityFrame& out);
FrameError decode_rst_stream(const Frame& frame, RstStreamFrame& out);
// `self` is our role: a client refuses SETTINGS_ENABLE_PUSH 1.
FrameError decode_settings(const Frame& frame, Role self, SettingsFrame& out);
// `self` is our role: a server refuses every PUSH_PROMISE.
FrameError decode_push_promise(const Frame& frame, Role self, PushPromiseFrame& out);
FrameError decode_ping(const Frame& frame, PingFrame& out);
FrameError decode_goaway(const Frame& frame, GoawayFrame& out);
FrameError decode_window_update(const Frame& frame, WindowUpdateFrame& out);
FrameError decode_continuation(const Frame& frame, ContinuationFrame& out);

// Whether one SETTINGS value is in its range (section 6.5.2, RFC 8441
// section 3, RFC 9218 section 2.1); unknown identifiers are. Every error is
// a connection error.
FrameError check_setting(Setting setting, Role self);

// A header block is a HEADERS or PUSH_PROMISE frame and the CONTINUATION
// frames up to the one with END_HEADERS, with no other frame in between,
// not even one of an unknown type (sections 4.3, 5.5 and 6.10). Pass every
// frame header through check(), before decoding the frame, unknown types
// included; any breach is a connection PROTOCOL_ERROR.
//
// The running totals let the caller bound a block before decoding it (a
// flood of empty CONTINUATION frames costs no HPACK work but still costs).
// One per connection; loop thread only.
class ContinuationCheck {
 public:
  FrameError check(const FrameHeader& header) {
    if (open_) {
      if (header.type != FrameType::kContinuation || header.stream_id != stream_id_)
        return FrameError::connection(ErrorCode::kProtocolError);
      block_bytes_ += header.length;
      ++block_frames_;
      open_ = !header.has(kFlagEndHeaders);
      return {};
    }
    if (header.type == FrameType::kContinuation) return FrameError::connection(ErrorCode::kProtocolError);
    if (header.type == FrameType::kHeaders || header.type == FrameType::kPushPromise) {
      stream_id_ = header.stream_id;
      block_bytes_ = header.length;
      block_frames_ = 1;
      open_ = !header.has(kFlagEndHeaders);
    }
    return {};
  }

  // Inside a block: only a CONTINUATION on stream_id() may come next.
  bool in_block() const { return open_; }
  // The stream of the latest block, open or ended.
  uint32_t stream_id() const { return stream_id_; }
  // The latest block's frames and their payload bytes so far (padding and
  // priority included: they are bytes the peer made us read).
  uint64_t block_bytes() const { return block_bytes_; }
  uint32_t block_frames() const { return block_frames_; }

 private:
  uint64_t block_bytes_ = 0;
  uint32_t stream_id_ = 0;
  uint32_t block_frames_ = 0;
  bool open_ = false;
};

}  // namespace tern::http2
