// What the frame tests share: frames built by hand byte by byte, every
// typed decoder behind one call that describes the frame as a line of
// text, and a connection-like loop that reads frames out of a net::Buffer
// fed in pieces.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "http2/frame.h"
#include "http2/frame_reader.h"
#include "net/buffer.h"

namespace tern::http2 {

// gtest's messages name the scope and code.
inline std::ostream& operator<<(std::ostream& os, const FrameError& e) {
  const char* scope = e.scope == ErrorScope::kNone ? "ok" : e.is_stream() ? "stream" : "connection";
  return os << scope << ' ' << to_string(e.code);
}

namespace frame_testing {

inline std::string be32(uint32_t v) {
  char b[4];
  store_u32(b, v);
  return {b, 4};
}

inline std::string setting(uint16_t id, uint32_t value) {
  char b[kSettingSize];
  store_u32(store_u16(b, id), value);
  return {b, kSettingSize};
}

// A frame with any type byte and raw stream id (reserved bit included).
inline std::string raw_frame(uint8_t type, uint8_t flags, uint32_t stream_id, std::string_view payload) {
  char h[kFrameHeaderSize];
  store_u24(h, static_cast<uint32_t>(payload.size()));
  h[3] = static_cast<char>(type);
  h[4] = static_cast<char>(flags);
  store_u32(h + 5, stream_id);
  return std::string(h, sizeof h) + std::string(payload);
}
inline std::string raw_frame(FrameType type, uint8_t flags, uint32_t stream_id, std::string_view payload) {
  return raw_frame(static_cast<uint8_t>(type), flags, stream_id, payload);
}

// Runs the decoder for the frame's type; *line describes what it decoded
// (unknown types: "unknown <type>").
inline FrameError decode_any(const Frame& f, Role self, std::string* line) {
  const FrameHeader& h = f.header;
  std::string s = std::string(to_string(h.type)) + " " + std::to_string(h.stream_id);
  auto flag = [&](const char* name, bool on) { s += std::string(" ") + name + "=" + (on ? "1" : "0"); };
  auto prio = [&](const Priority& p) {
    s += " dep=" + std::to_string(p.depends_on) + " w=" + std::to_string(p.weight) + " ex=" + (p.exclusive ? "1" : "0");
  };
  FrameError e;
  switch (h.type) {
    case FrameType::kData: {
      DataFrame d;
      e = decode_data(f, d);
      flag("es", d.end_stream);
      s += " flow=" + std::to_string(d.flow_length) + " '" + std::string(d.data) + "'";
      break;
    }
    case FrameType::kHeaders: {
      HeadersFrame d;
      e = decode_headers(f, d);
      flag("es", d.end_stream);
      flag("eh", d.end_headers);
      if (d.has_priority) prio(d.priority);
      s += " '" + std::string(d.block) + "'";
      break;
    }
    case FrameType::kPriority: {
      PriorityFrame d;
      e = decode_priority(f, d);
      prio(d.priority);
      break;
    }
    case FrameType::kRstStream: {
      RstStreamFrame d;
      e = decode_rst_stream(f, d);
      s += std::string(" ") + to_string(d.code);
      break;
    }
    case FrameType::kSettings: {
      SettingsFrame d;
      e = decode_settings(f, self, d);
      flag("ack", d.ack);
      if (e.ok())
        for (Setting st : d) s += " " + std::to_string(static_cast<int>(st.id)) + ":" + std::to_string(st.value);
      break;
    }
    case FrameType::kPushPromise: {
      PushPromiseFrame d;
      e = decode_push_promise(f, self, d);
      flag("eh", d.end_headers);
      s += " promised=" + std::to_string(d.promised_stream_id) + " '" + std::string(d.block) + "'";
      break;
    }
    case FrameType::kPing: {
      PingFrame d;
      e = decode_ping(f, d);
      flag("ack", d.ack);
      s += " " + std::to_string(d.opaque);
      break;
    }
    case FrameType::kGoaway: {
      GoawayFrame d;
      e = decode_goaway(f, d);
      s += " last=" + std::to_string(d.last_stream_id) + " " + to_string(d.code) + " '" + std::string(d.debug) + "'";
      break;
    }
    case FrameType::kWindowUpdate: {
      WindowUpdateFrame d;
      e = decode_window_update(f, d);
      s += " +" + std::to_string(d.increment);
      break;
    }
    case FrameType::kContinuation: {
      ContinuationFrame d;
      e = decode_continuation(f, d);
      flag("eh", d.end_headers);
      s += " '" + std::string(d.block) + "'";
      break;
    }
    default:
      s = "unknown " + std::to_string(static_cast<int>(h.type)) + " " + std::to_string(h.stream_id);
      break;
  }
  if (!e.ok()) s = "error";
  if (line) *line = s;
  return e;
}

// The first frame of `bytes`, which must hold one whole.
inline Frame only_frame(std::string_view bytes, uint32_t max_frame_size = kMaxFrameSizeLimit) {
  ReadResult r = read_frame(bytes, max_frame_size);
  EXPECT_EQ(r.status, ReadStatus::kFrame);
  EXPECT_EQ(r.size, bytes.size());
  return r.frame;
}

// Feeds `bytes` into a net::Buffer in pieces ending at each of `cuts` (and
// at the end), reading frames as a connection does: each decoded line, or
// "error ..." at the first error, after which reading stops.
inline std::vector<std::string> read_pieces(std::string_view bytes, const std::vector<size_t>& cuts,
                                            Role self = Role::kServer,
                                            uint32_t max_frame_size = kDefaultMaxFrameSize) {
  std::vector<std::string> lines;
  net::Buffer in;
  ContinuationCheck sequence;
  size_t fed = 0;
  std::vector<size_t> ends = cuts;
  ends.push_back(bytes.size());
  for (size_t end : ends) {
    in.append(bytes.substr(fed, end - fed));
    fed = end;
    for (;;) {
      ReadResult r = read_frame(in.view(), max_frame_size);
      if (r.status == ReadStatus::kNeedMore) {
        EXPECT_GT(r.size, in.readable_bytes());
        break;
      }
      if (r.status == ReadStatus::kError) {
        lines.push_back("error frame size");
        return lines;
      }
      const std::string_view view = in.view();
      EXPECT_TRUE(r.frame.payload.empty() || (r.frame.payload.data() >= view.data() &&
                                              r.frame.payload.data() + r.frame.payload.size() <= view.data() + view.size()));
      std::string line;
      FrameError e = sequence.check(r.frame.header);
      if (e.ok()) e = decode_any(r.frame, self, &line);
      if (!e.ok()) {
        std::ostringstream os;
        os << "error " << e;
        lines.push_back(os.str());
        return lines;
      }
      lines.push_back(line);
      in.retrieve(r.size);
    }
  }
  EXPECT_TRUE(in.empty()) << in.readable_bytes() << " bytes left over";
  return lines;
}

}  // namespace frame_testing
}  // namespace tern::http2
