// libFuzzer harness for the HTTP/2 frame layer (http2/frame_reader.h,
// frame_writer.h). The input's first byte picks our max frame size and our
// role; the rest is read as frames from a net::Buffer fed in pieces, as a
// connection reads them: whole, in two pieces cut where the data says, and
// one byte at a time, with the same frames and the same first error each
// way. Every typed decoder runs on every frame's payload (not only its own
// type's), and must keep its views inside the payload. A frame that decodes
// is written again by the writer and must read back the same.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "http2/frame_reader.h"
#include "http2/frame_writer.h"
#include "net/buffer.h"

namespace {

using namespace tern::http2;  // the harness touches most of it
using tern::fuzz::inside;
using tern::fuzz::mix;
using tern::net::Buffer;

struct Config {
  uint32_t max_frame_size;
  Role self;
};

// The one frame the writer just wrote to `out`, read back.
Frame reread(const Buffer& out) {
  ReadResult r = read_frame(out.view(), kMaxFrameSizeLimit);
  FUZZ_CHECK(r.status == ReadStatus::kFrame && r.size == out.readable_bytes());
  return r.frame;
}

void check_error(FrameError e) {
  FUZZ_CHECK(e.ok() == (e.scope == ErrorScope::kNone));
  FUZZ_CHECK(e.ok() == (e.code == ErrorCode::kNoError));
}

// Each decoder on `frame` as if it were of its type; returns the error of
// the frame's own type.
FrameError decode_all(const Frame& frame, Role self) {
  const std::string_view payload = frame.payload;
  FrameError own;
  for (uint8_t t = 0; t <= static_cast<uint8_t>(FrameType::kContinuation); ++t) {
    Frame f = frame;
    f.header.type = static_cast<FrameType>(t);
    FrameError e;
    Buffer out(0);
    switch (f.header.type) {
      case FrameType::kData: {
        DataFrame d;
        e = decode_data(f, d);
        if (!e.ok()) break;
        FUZZ_CHECK(inside(d.data, payload) && d.flow_length == payload.size());
        write_data(out, d.stream_id, d.data, d.end_stream);
        DataFrame again;
        FUZZ_CHECK(decode_data(reread(out), again).ok() && again.data == d.data && again.end_stream == d.end_stream);
        break;
      }
      case FrameType::kHeaders: {
        HeadersFrame d;
        e = decode_headers(f, d);
        if (e.is_connection()) break;
        FUZZ_CHECK(inside(d.block, payload) && d.stream_id != 0);
        FUZZ_CHECK(!e.is_stream() || (d.has_priority && d.priority.depends_on == d.stream_id));
        write_headers(out, d.stream_id, d.block, d.end_stream, kMaxFrameSizeLimit);
        HeadersFrame again;
        FUZZ_CHECK(decode_headers(reread(out), again).ok() && again.block == d.block && again.end_headers);
        break;
      }
      case FrameType::kPriority: {
        PriorityFrame d;
        e = decode_priority(f, d);
        if (!e.ok()) break;
        write_priority(out, d.stream_id, d.priority);
        PriorityFrame again;
        FUZZ_CHECK(decode_priority(reread(out), again).ok() && again.priority == d.priority);
        break;
      }
      case FrameType::kRstStream: {
        RstStreamFrame d;
        e = decode_rst_stream(f, d);
        if (!e.ok()) break;
        write_rst_stream(out, d.stream_id, d.code);
        FUZZ_CHECK(reread(out).payload == payload);
        break;
      }
      case FrameType::kSettings: {
        SettingsFrame d;
        e = decode_settings(f, self, d);
        if (!e.ok()) break;
        FUZZ_CHECK(inside(d.entries, payload) && d.size() * kSettingSize == payload.size());
        std::vector<Setting> all;
        for (Setting s : d) {
          FUZZ_CHECK(check_setting(s, self).ok());
          all.push_back(s);
        }
        if (d.ack) {
          write_settings_ack(out);
        } else {
          write_settings(out, all);
        }
        FUZZ_CHECK(reread(out).payload == payload);
        break;
      }
      case FrameType::kPushPromise: {
        PushPromiseFrame d;
        e = decode_push_promise(f, self, d);
        if (!e.ok()) break;
        FUZZ_CHECK(self == Role::kClient && inside(d.block, payload) && d.promised_stream_id != 0);
        write_push_promise(out, d.stream_id, d.promised_stream_id, d.block, kMaxFrameSizeLimit);
        PushPromiseFrame again;
        FUZZ_CHECK(decode_push_promise(reread(out), self, again).ok() && again.block == d.block);
        break;
      }
      case FrameType::kPing: {
        PingFrame d;
        e = decode_ping(f, d);
        if (!e.ok()) break;
        write_ping(out, d.opaque, d.ack);
        FUZZ_CHECK(reread(out).payload == payload);
        break;
      }
      case FrameType::kGoaway: {
        GoawayFrame d;
        e = decode_goaway(f, d);
        if (!e.ok()) break;
        FUZZ_CHECK(inside(d.debug, payload) && d.debug.size() + 8 == payload.size());
        write_goaway(out, d.last_stream_id, d.code, d.debug);
        GoawayFrame again;
        FUZZ_CHECK(decode_goaway(reread(out), again).ok() && again.debug == d.debug &&
                   again.last_stream_id == d.last_stream_id && again.code == d.code);
        break;
      }
      case FrameType::kWindowUpdate: {
        WindowUpdateFrame d;
        e = decode_window_update(f, d);
        if (!e.ok()) break;
        FUZZ_CHECK(d.increment >= 1 && d.increment <= kMaxWindowSize);
        write_window_update(out, d.stream_id, d.increment);
        WindowUpdateFrame again;
        FUZZ_CHECK(decode_window_update(reread(out), again).ok() && again.increment == d.increment);
        break;
      }
      case FrameType::kContinuation: {
        ContinuationFrame d;
        e = decode_continuation(f, d);
        if (!e.ok()) break;
        FUZZ_CHECK(d.block.data() == payload.data() && d.block.size() == payload.size());
        break;
      }
    }
    check_error(e);
    if (f.header.type == frame.header.type) own = e;
  }
  return is_known(frame.header.type) ? own : FrameError{};
}

// What reading showed: two words per frame (header; flags and error), or
// one word for a frame too large. Reading stops at a connection error.
struct Seen {
  std::vector<uint64_t> words;
  bool ended = false;
};

// Reads the frames at the start of `view`; returns the bytes consumed.
size_t read_frames(std::string_view view, const Config& config, ContinuationCheck& sequence, Seen& seen) {
  size_t used = 0;
  while (!seen.ended) {
    const std::string_view rest = view.substr(used);
    ReadResult r = read_frame(rest, config.max_frame_size);
    if (r.status == ReadStatus::kNeedMore) {
      FUZZ_CHECK(r.size > rest.size());
      break;
    }
    if (r.status == ReadStatus::kError) {
      FUZZ_CHECK(r.frame.header.length > config.max_frame_size && r.error.is_connection());
      seen.words.push_back(~uint64_t{0});
      seen.ended = true;
      break;
    }
    const FrameHeader& h = r.frame.header;
    FUZZ_CHECK(r.size == kFrameHeaderSize + h.length && r.size <= rest.size());
    FUZZ_CHECK(h.length <= config.max_frame_size && h.stream_id <= kStreamIdMask);
    FUZZ_CHECK(r.frame.payload.size() == h.length && inside(r.frame.payload, rest));
    FrameError e = sequence.check(h);
    if (e.ok()) e = decode_all(r.frame, config.self);
    seen.words.push_back(uint64_t{h.length} << 40 | uint64_t{static_cast<uint8_t>(h.type)} << 32 | h.stream_id);
    seen.words.push_back(uint64_t{h.flags} << 40 | uint64_t{static_cast<uint8_t>(e.scope)} << 32 |
                         static_cast<uint32_t>(e.code));
    seen.ended = e.is_connection();
    used += r.size;
  }
  return used;
}

// Straight from the input, which libFuzzer allocates to its exact size:
// ASan sees any read past it.
std::vector<uint64_t> read_whole(std::string_view input, const Config& config) {
  Seen seen;
  ContinuationCheck sequence;
  read_frames(input, config, sequence, seen);
  return seen.words;
}

// Through a net::Buffer fed in pieces ending at each of `ends`, dropping
// what was read, as a connection does.
std::vector<uint64_t> read_pieces(std::string_view input, const std::vector<size_t>& ends, const Config& config) {
  Seen seen;
  ContinuationCheck sequence;
  Buffer in;
  size_t fed = 0;
  for (size_t end : ends) {
    in.append(input.substr(fed, end - fed));
    fed = end;
    in.retrieve(read_frames(in.view(), config, sequence, seen));
    if (seen.ended) break;
  }
  return seen.words;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  constexpr uint32_t kSizes[] = {kDefaultMaxFrameSize, 64, 0, kMaxFrameSizeLimit};
  const Config config{kSizes[data[0] & 3], (data[0] & 4) ? Role::kClient : Role::kServer};
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t cut = input.empty() ? 0 : mix(input) % (input.size() + 1);
  std::vector<size_t> bytes;
  for (size_t n = 1; n <= input.size(); ++n) bytes.push_back(n);

  const std::vector<uint64_t> whole = read_whole(input, config);
  FUZZ_CHECK(whole == read_pieces(input, {cut, input.size()}, config));
  FUZZ_CHECK(whole == read_pieces(input, bytes, config));
  return 0;
}
