// The frame writer, checked through the reader: every frame type reads back
// as written, the exact bytes of a few, header blocks split into
// CONTINUATION frames at the peer's max frame size with the flags on the
// right frames, and frames whose header is filled in after the payload.
#include "http2/frame_writer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frame_test_support.h"
#include "http2/frame_reader.h"

namespace tern::http2 {
namespace {

using frame_testing::be32;
using frame_testing::raw_frame;
using frame_testing::read_pieces;
using frame_testing::setting;
using T = FrameType;

std::string bytes(const net::Buffer& out) { return std::string(out.view()); }

std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7 + i / 251);
  return s;
}

TEST(FrameWriter, WritesTheRfcBytes) {
  net::Buffer out;
  write_settings(out, {{SettingId::kMaxConcurrentStreams, 100}, {SettingId::kInitialWindowSize, 1 << 20}});
  EXPECT_EQ(bytes(out), raw_frame(T::kSettings, 0, 0, setting(3, 100) + setting(4, 1 << 20)));
  out.retrieve_all();
  write_settings_ack(out);
  EXPECT_EQ(bytes(out), raw_frame(T::kSettings, kFlagAck, 0, ""));
  out.retrieve_all();
  write_ping(out, 0x0102030405060708, true);
  EXPECT_EQ(bytes(out), raw_frame(T::kPing, kFlagAck, 0, "\1\2\3\4\5\6\7\x08"));
  out.retrieve_all();
  write_goaway(out, 7, ErrorCode::kEnhanceYourCalm, "calm");
  EXPECT_EQ(bytes(out), raw_frame(T::kGoaway, 0, 0, be32(7) + be32(0xb) + "calm"));
  out.retrieve_all();
  write_rst_stream(out, 3, ErrorCode::kRefusedStream);
  EXPECT_EQ(bytes(out), raw_frame(T::kRstStream, 0, 3, be32(7)));
  out.retrieve_all();
  write_window_update(out, 0, kMaxWindowSize);
  EXPECT_EQ(bytes(out), raw_frame(T::kWindowUpdate, 0, 0, be32(0x7fffffff)));
  out.retrieve_all();
  write_priority(out, 5, {3, 256, true});
  EXPECT_EQ(bytes(out), raw_frame(T::kPriority, 0, 5, be32(0x80000003) + "\xff"));
  out.retrieve_all();
  write_data(out, 1, "abc", true);
  EXPECT_EQ(bytes(out), raw_frame(T::kData, kFlagEndStream, 1, "abc"));
}

TEST(FrameWriter, EveryTypeReadsBackAsWritten) {
  net::Buffer out(0);  // no storage: every write has to grow it
  write_settings(out, {{SettingId::kHeaderTableSize, 0},
                       {SettingId::kEnablePush, 0},
                       {SettingId::kMaxFrameSize, kMaxFrameSizeLimit},
                       {SettingId::kMaxHeaderListSize, 65536},
                       {SettingId::kEnableConnectProtocol, 1},
                       {SettingId::kNoRfc7540Priorities, 1}});
  write_settings(out, {});
  write_settings_ack(out);
  write_ping(out, 42, false);
  write_window_update(out, 0, 1);
  write_headers(out, 1, "block", false, kDefaultMaxFrameSize);
  write_priority(out, 3, {1, 1, false});
  write_data(out, 1, "", false);
  write_data_header(out, 1, 4, false);
  out.append("body");
  write_window_update(out, 1, 5);
  write_data(out, 1, "end", true);
  write_push_promise(out, 1, 2, "promise", kDefaultMaxFrameSize);
  write_headers(out, 3, "h3", true, kDefaultMaxFrameSize);
  write_rst_stream(out, 3, ErrorCode::kCancel);
  write_goaway(out, 3, ErrorCode::kProtocolError, "");
  const std::vector<std::string> want = {
      "SETTINGS 0 ack=0 1:0 2:0 5:16777215 6:65536 8:1 9:1",
      "SETTINGS 0 ack=0",
      "SETTINGS 0 ack=1",
      "PING 0 ack=0 42",
      "WINDOW_UPDATE 0 +1",
      "HEADERS 1 es=0 eh=1 'block'",
      "PRIORITY 3 dep=1 w=1 ex=0",
      "DATA 1 es=0 flow=0 ''",
      "DATA 1 es=0 flow=4 'body'",
      "WINDOW_UPDATE 1 +5",
      "DATA 1 es=1 flow=3 'end'",
      "PUSH_PROMISE 1 eh=1 promised=2 'promise'",
      "HEADERS 3 es=1 eh=1 'h3'",
      "RST_STREAM 3 CANCEL",
      "GOAWAY 0 last=3 PROTOCOL_ERROR ''",
  };
  EXPECT_EQ(read_pieces(bytes(out), {}, Role::kClient), want);
}

// The frames of one header block, as read back.
struct Piece {
  FrameHeader header;
  std::string payload;
};
std::vector<Piece> frames_of(const net::Buffer& out) {
  std::vector<Piece> pieces;
  std::string_view in = out.view();
  while (!in.empty()) {
    ReadResult r = read_frame(in, kMaxFrameSizeLimit);
    EXPECT_EQ(r.status, ReadStatus::kFrame);
    if (r.status != ReadStatus::kFrame) break;
    pieces.push_back({r.frame.header, std::string(r.frame.payload)});
    in.remove_prefix(r.size);
  }
  return pieces;
}

TEST(FrameWriter, SplitsA40KiBBlockIntoThreeFrames) {
  const std::string block = pattern(40 * 1024);
  net::Buffer out;
  write_headers(out, 1, block, true, kDefaultMaxFrameSize);
  const std::vector<Piece> f = frames_of(out);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].header, (FrameHeader{16384, T::kHeaders, kFlagEndStream, 1}));
  EXPECT_EQ(f[1].header, (FrameHeader{16384, T::kContinuation, 0, 1}));
  EXPECT_EQ(f[2].header, (FrameHeader{8192, T::kContinuation, kFlagEndHeaders, 1}));
  EXPECT_EQ(f[0].payload + f[1].payload + f[2].payload, block);
  EXPECT_EQ(out.readable_bytes(), block.size() + 3 * kFrameHeaderSize);
}

TEST(FrameWriter, ABlockOfExactlyTwoFramesHasNoEmptyThird) {
  net::Buffer out;
  write_headers(out, 1, pattern(2 * kDefaultMaxFrameSize), false, kDefaultMaxFrameSize);
  const std::vector<Piece> f = frames_of(out);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].header.flags, 0);
  EXPECT_EQ(f[1].header, (FrameHeader{kDefaultMaxFrameSize, T::kContinuation, kFlagEndHeaders, 1}));
}

TEST(FrameWriter, AnEmptyBlockIsOneHeadersFrame) {
  net::Buffer out;
  write_headers(out, 1, "", true, kDefaultMaxFrameSize);
  EXPECT_EQ(bytes(out), raw_frame(T::kHeaders, kFlagEndStream | kFlagEndHeaders, 1, ""));
}

TEST(FrameWriter, SplitsBlocksAtEveryMaxFrameSize) {
  for (uint32_t max : {1u, 2u, 3u, 7u, 100u}) {
    for (size_t size : {size_t{0}, size_t{1}, size_t{max}, size_t{max} + 1, size_t{3} * max, size_t{250}}) {
      SCOPED_TRACE("max " + std::to_string(max) + " size " + std::to_string(size));
      const std::string block = pattern(size);
      net::Buffer out;
      out.append("x");  // not at the start of the buffer
      out.retrieve(1);
      write_headers(out, 9, block, size % 2 == 0, max);
      const std::vector<Piece> f = frames_of(out);
      ASSERT_EQ(f.size(), size == 0 ? 1 : (size + max - 1) / max);
      std::string joined;
      for (size_t i = 0; i < f.size(); ++i) {
        const FrameHeader& h = f[i].header;
        EXPECT_EQ(h.type, i == 0 ? T::kHeaders : T::kContinuation);
        EXPECT_EQ(h.stream_id, 9u);
        EXPECT_LE(h.length, max);
        EXPECT_EQ(h.has(kFlagEndHeaders), i + 1 == f.size());
        EXPECT_EQ(h.has(kFlagEndStream), i == 0 && size % 2 == 0);
        joined += f[i].payload;
      }
      EXPECT_EQ(joined, block);
    }
  }
}

TEST(FrameWriter, PushPromiseCountsThePromisedIdInItsFirstFrame) {
  net::Buffer out;
  write_push_promise(out, 1, 2, "abcdefghij", 8);
  const std::vector<Piece> f = frames_of(out);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].header, (FrameHeader{8, T::kPushPromise, 0, 1}));
  EXPECT_EQ(f[0].payload, be32(2) + "abcd");
  EXPECT_EQ(f[1].header, (FrameHeader{6, T::kContinuation, kFlagEndHeaders, 1}));
  EXPECT_EQ(read_pieces(bytes(out), {}, Role::kClient),
            (std::vector<std::string>{"PUSH_PROMISE 1 eh=0 promised=2 'abcd'", "CONTINUATION 1 eh=1 'efghij'"}));
}

TEST(FrameWriter, DataHeaderAloneThenThePayload) {
  net::Buffer out;
  write_data_header(out, 5, 3, true);
  EXPECT_EQ(out.readable_bytes(), kFrameHeaderSize);
  out.append("xyz");
  EXPECT_EQ(bytes(out), raw_frame(T::kData, kFlagEndStream, 5, "xyz"));
}

TEST(FrameWriter, EndFrameFillsTheReservedHeaderAfterGrowth) {
  net::Buffer out(16);
  out.append("previous frame bytes");
  out.retrieve(9);  // the readable start is not the buffer's start
  const std::string before(out.view());
  FrameStart start = begin_frame(out);
  const std::string payload = pattern(100000);  // forces reallocation and a slide
  out.append(payload);
  EXPECT_EQ(end_frame(out, start, T::kData, kFlagEndStream, 7), payload.size());
  EXPECT_EQ(bytes(out), before + raw_frame(T::kData, kFlagEndStream, 7, payload));
}

TEST(FrameWriter, EndFrameWithAnEmptyPayload) {
  net::Buffer out;
  FrameStart start = begin_frame(out);
  EXPECT_EQ(end_frame(out, start, T::kSettings, kFlagAck, 0), 0u);
  EXPECT_EQ(bytes(out), raw_frame(T::kSettings, kFlagAck, 0, ""));
}

TEST(FrameWriter, WritesTheReservedBitAsZero) {
  net::Buffer out;
  write_frame_header(out, 0, T::kData, 0, 0x80000001);
  EXPECT_EQ(bytes(out), raw_frame(T::kData, 0, 1, ""));
}

TEST(FrameHeader, LoadsWhatItStores) {
  char b[kFrameHeaderSize];
  for (uint32_t length : {0u, 1u, 0x123456u, kMaxFrameSizeLimit}) {
    for (uint32_t stream : {0u, 1u, 0x7fffffffu}) {
      store_frame_header(b, length, static_cast<FrameType>(0xab), 0xcd, stream);
      EXPECT_EQ(load_frame_header(b), (FrameHeader{length, static_cast<FrameType>(0xab), 0xcd, stream}));
    }
  }
}

}  // namespace
}  // namespace tern::http2
