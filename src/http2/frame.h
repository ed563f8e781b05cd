// The vocabulary of HTTP/2 framing (RFC 9113 sections 4, 6 and 7): frame
// types, flags, error codes, SETTINGS identifiers, the limits the RFC
// fixes, the client preface, the 9-byte frame header, and the error a frame
// can raise, classified as a stream or a connection error (section 5.4).
//
// frame_reader.h reads frames from bytes; frame_writer.h writes them into a
// net::Buffer. Both use only this header and base, so byte strings are all
// their tests need.
//
// Constants and pure functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tern::http2 {

// Section 6. Types past kContinuation are extensions (section 5.5): a
// FrameType holds any byte, and a receiver ignores the types it does not
// know.
enum class FrameType : uint8_t {
  kData = 0x0,
  kHeaders = 0x1,
  kPriority = 0x2,
  kRstStream = 0x3,
  kSettings = 0x4,
  kPushPromise = 0x5,
  kPing = 0x6,
  kGoaway = 0x7,
  kWindowUpdate = 0x8,
  kContinuation = 0x9,
};

inline constexpr bool is_known(FrameType type) { return type <= FrameType::kContinuation; }
const char* to_string(FrameType type);

// Flags: each frame type defines its own, and a receiver ignores the rest
// (section 4.1). END_STREAM and ACK share a bit.
inline constexpr uint8_t kFlagEndStream = 0x01;   // DATA, HEADERS
inline constexpr uint8_t kFlagAck = 0x01;         // SETTINGS, PING
inline constexpr uint8_t kFlagEndHeaders = 0x04;  // HEADERS, PUSH_PROMISE, CONTINUATION
inline constexpr uint8_t kFlagPadded = 0x08;      // DATA, HEADERS, PUSH_PROMISE
inline constexpr uint8_t kFlagPriority = 0x20;    // HEADERS

// Section 7. As with FrameType, an ErrorCode may hold a value the RFC does
// not name (a peer's RST_STREAM or GOAWAY may carry one); section 7 asks
// that such codes get no special treatment.
enum class ErrorCode : uint32_t {
  kNoError = 0x0,
  kProtocolError = 0x1,
  kInternalError = 0x2,
  kFlowControlError = 0x3,
  kSettingsTimeout = 0x4,
  kStreamClosed = 0x5,
  kFrameSizeError = 0x6,
  kRefusedStream = 0x7,
  kCancel = 0x8,
  kCompressionError = 0x9,
  kConnectError = 0xa,
  kEnhanceYourCalm = 0xb,
  kInadequateSecurity = 0xc,
  kHttp11Required = 0xd,
};

const char* to_string(ErrorCode code);

// Section 6.5.2, plus RFC 8441 (extended CONNECT) and RFC 9218
// (priorities). Unknown identifiers pass through as their number.
enum class SettingId : uint16_t {
  kHeaderTableSize = 0x1,
  kEnablePush = 0x2,
  kMaxConcurrentStreams = 0x3,
  kInitialWindowSize = 0x4,
  kMaxFrameSize = 0x5,
  kMaxHeaderListSize = 0x6,
  kEnableConnectProtocol = 0x8,
  kNoRfc7540Priorities = 0x9,
};

struct Setting {
  SettingId id;
  uint32_t value;
  friend bool operator==(const Setting&, const Setting&) = default;
};

// A PRIORITY frame's fields, also in HEADERS with the PRIORITY flag (RFC
// 9113 deprecates this scheme, section 5.3.2: a receiver checks and
// ignores it).
struct Priority {
  uint32_t depends_on = 0;
  uint16_t weight = 16;  // 1..256: the byte sent plus one
  bool exclusive = false;
  friend bool operator==(const Priority&, const Priority&) = default;
};

// Fixed sizes and limits.
inline constexpr size_t kFrameHeaderSize = 9;
inline constexpr size_t kSettingSize = 6;  // one SETTINGS entry: id, value
inline constexpr size_t kPrioritySize = 5;  // exclusive bit, dependency, weight
// Before any SETTINGS: what a peer may send us and we may send it.
inline constexpr uint32_t kDefaultMaxFrameSize = 16384;
inline constexpr uint32_t kMaxFrameSizeLimit = (1u << 24) - 1;  // the largest legal setting
inline constexpr uint32_t kDefaultInitialWindowSize = 65535;
inline constexpr uint32_t kMaxWindowSize = 0x7fffffff;  // 2^31-1, any flow-control window
inline constexpr uint32_t kDefaultHeaderTableSize = 4096;
inline constexpr uint32_t kStreamIdMask = 0x7fffffff;  // clears the reserved bit

// What a client sends before its first frame (section 3.4), a valid
// HTTP/1 request line on purpose so that an HTTP/1 server fails fast.
inline constexpr std::string_view kClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

enum class PrefaceStatus : uint8_t { kMatch, kNeedMore, kMismatch };

// Checks the start of a server's input against kClientPreface: kMatch when
// all 24 bytes are there, kMismatch as soon as one byte differs (so that an
// HTTP/1 request sent to an HTTP/2-only port fails on its first bytes).
inline PrefaceStatus match_preface(std::string_view input) {
  const size_t n = input.size() < kClientPreface.size() ? input.size() : kClientPreface.size();
  if (input.substr(0, n) != kClientPreface.substr(0, n)) return PrefaceStatus::kMismatch;
  return n == kClientPreface.size() ? PrefaceStatus::kMatch : PrefaceStatus::kNeedMore;
}

// Which end of the connection we are: a server refuses PUSH_PROMISE (a
// client cannot push, section 8.4), a client refuses SETTINGS_ENABLE_PUSH 1
// (a server must not send it, section 6.5.2).
enum class Role : uint8_t { kServer, kClient };

// Big-endian loads and stores over raw bytes. The shifts compile to a load
// and a bswap; memcpy plus be32toh would say the same less portably.
inline uint32_t load_u16(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{b[0]} << 8 | b[1];
}
inline uint32_t load_u24(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{b[0]} << 16 | uint32_t{b[1]} << 8 | b[2];
}
inline uint32_t load_u32(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{b[0]} << 24 | uint32_t{b[1]} << 16 | uint32_t{b[2]} << 8 | b[3];
}
inline uint64_t load_u64(const char* p) { return uint64_t{load_u32(p)} << 32 | load_u32(p + 4); }

// Each store returns the byte after what it wrote.
inline char* store_u16(char* p, uint32_t v) {
  p[0] = static_cast<char>(v >> 8);
  p[1] = static_cast<char>(v);
  return p + 2;
}
inline char* store_u24(char* p, uint32_t v) {
  p[0] = static_cast<char>(v >> 16);
  p[1] = static_cast<char>(v >> 8);
  p[2] = static_cast<char>(v);
  return p + 3;
}
inline char* store_u32(char* p, uint32_t v) {
  p[0] = static_cast<char>(v >> 24);
  p[1] = static_cast<char>(v >> 16);
  p[2] = static_cast<char>(v >> 8);
  p[3] = static_cast<char>(v);
  return p + 4;
}
inline char* store_u64(char* p, uint64_t v) {
  return store_u32(store_u32(p, static_cast<uint32_t>(v >> 32)), static_cast<uint32_t>(v));
}

// The 9 bytes before every payload (section 4.1).
struct FrameHeader {
  uint32_t length = 0;  // of the payload, 24 bits
  FrameType type = FrameType::kData;
  uint8_t flags = 0;
  uint32_t stream_id = 0;  // the reserved bit already cleared (ignored on receipt)

  bool has(uint8_t flag) const { return (flags & flag) != 0; }
  friend bool operator==(const FrameHeader&, const FrameHeader&) = default;
};

// p must hold kFrameHeaderSize bytes.
inline FrameHeader load_frame_header(const char* p) {
  return {load_u24(p), static_cast<FrameType>(p[3]), static_cast<uint8_t>(p[4]),
          load_u32(p + 5) & kStreamIdMask};
}

// Writes 9 bytes at p; returns p + 9. The reserved bit is sent as 0.
inline char* store_frame_header(char* p, uint32_t length, FrameType type, uint8_t flags,
                                uint32_t stream_id) {
  p = store_u24(p, length);
  *p++ = static_cast<char>(type);
  *p++ = static_cast<char>(flags);
  return store_u32(p, stream_id & kStreamIdMask);
}

// How far an error reaches (section 5.4): a stream error ends one stream
// (RST_STREAM with the code), a connection error ends them all (GOAWAY with
// the code, then close). An endpoint may always treat a stream error as a
// connection error.
enum class ErrorScope : uint8_t { kNone, kStream, kConnection };

struct [[nodiscard]] FrameError {
  ErrorScope scope = ErrorScope::kNone;
  ErrorCode code = ErrorCode::kNoError;

  static constexpr FrameError stream(ErrorCode code) { return {ErrorScope::kStream, code}; }
  static constexpr FrameError connection(ErrorCode code) { return {ErrorScope::kConnection, code}; }
  bool ok() const { return scope == ErrorScope::kNone; }
  bool is_stream() const { return scope == ErrorScope::kStream; }
  bool is_connection() const { return scope == ErrorScope::kConnection; }
  friend bool operator==(const FrameError&, const FrameError&) = default;
};

}  // namespace tern::http2
