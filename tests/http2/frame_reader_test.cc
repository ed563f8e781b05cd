// The frame reader: every framing rule of RFC 9113 section 6 as its own
// case (the code, and stream or connection), read_frame's three outcomes,
// the CONTINUATION sequence, and a stream of every frame type read the
// same however its bytes are cut.
#include "http2/frame_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frame_test_support.h"

namespace tern::http2 {
namespace {

using frame_testing::be32;
using frame_testing::decode_any;
using frame_testing::only_frame;
using frame_testing::raw_frame;
using frame_testing::read_pieces;
using frame_testing::setting;
using T = FrameType;
using namespace std::string_literals;

constexpr FrameError kOk{};
constexpr FrameError conn(ErrorCode c) { return FrameError::connection(c); }
constexpr FrameError strm(ErrorCode c) { return FrameError::stream(c); }
constexpr ErrorCode kProtocol = ErrorCode::kProtocolError;
constexpr ErrorCode kFrameSize = ErrorCode::kFrameSizeError;

struct Rule {
  const char* name;
  std::string frame;
  FrameError expected;
  Role self = Role::kServer;
};

std::string prio(uint32_t word, uint8_t weight) { return be32(word) + std::string(1, static_cast<char>(weight)); }

std::vector<Rule> rules() {
  const std::string ping8(8, 'p');
  return {
      // Which frames need a stream, and which must not have one.
      {"DataOnStreamZero", raw_frame(T::kData, 0, 0, "x"), conn(kProtocol)},
      {"HeadersOnStreamZero", raw_frame(T::kHeaders, kFlagEndHeaders, 0, "x"), conn(kProtocol)},
      {"PriorityOnStreamZero", raw_frame(T::kPriority, 0, 0, prio(1, 0)), conn(kProtocol)},
      {"RstStreamOnStreamZero", raw_frame(T::kRstStream, 0, 0, be32(8)), conn(kProtocol)},
      {"ContinuationOnStreamZero", raw_frame(T::kContinuation, kFlagEndHeaders, 0, "x"), conn(kProtocol)},
      {"PushPromiseOnStreamZero", raw_frame(T::kPushPromise, 0, 0, be32(2)), conn(kProtocol), Role::kClient},
      {"SettingsOnStream", raw_frame(T::kSettings, 0, 1, ""), conn(kProtocol)},
      {"PingOnStream", raw_frame(T::kPing, 0, 1, ping8), conn(kProtocol)},
      {"GoawayOnStream", raw_frame(T::kGoaway, 0, 1, be32(0) + be32(0)), conn(kProtocol)},
      // Padding.
      {"DataPaddingFillsPayload", raw_frame(T::kData, kFlagPadded, 1, "\x02" "ab"), kOk},
      {"DataPadLengthIsPayloadLength", raw_frame(T::kData, kFlagPadded, 1, "\x03" "ab"), conn(kProtocol)},
      {"DataPadLengthPastPayload", raw_frame(T::kData, kFlagPadded, 1, "\xff" "ab"), conn(kProtocol)},
      {"DataPaddedWithoutPadLength", raw_frame(T::kData, kFlagPadded, 1, ""), conn(kFrameSize)},
      {"HeadersPadLengthIsPayloadLength", raw_frame(T::kHeaders, kFlagPadded, 1, "\x03" "ab"), conn(kProtocol)},
      {"HeadersPaddingOverPriority",
       raw_frame(T::kHeaders, kFlagPadded | kFlagPriority, 1, "\x01" + prio(3, 0)), conn(kProtocol)},
      {"HeadersPaddedPriorityFits",
       raw_frame(T::kHeaders, kFlagPadded | kFlagPriority, 1, "\x01" + prio(3, 0) + "z"), kOk},
      {"PushPromisePadLengthPastPayload",
       raw_frame(T::kPushPromise, kFlagPadded, 1, "\x02" + be32(2) + "a"), conn(kProtocol), Role::kClient},
      // HEADERS with the PRIORITY flag.
      {"HeadersPriorityTooShort", raw_frame(T::kHeaders, kFlagPriority, 1, "abcd"), conn(kFrameSize)},
      {"HeadersDependsOnItself", raw_frame(T::kHeaders, kFlagPriority, 3, prio(3, 0) + "b"), strm(kProtocol)},
      {"HeadersExclusiveOnItself", raw_frame(T::kHeaders, kFlagPriority, 3, prio(0x80000003, 0)), strm(kProtocol)},
      {"HeadersDependsOnOther", raw_frame(T::kHeaders, kFlagPriority, 3, prio(1, 255) + "b"), kOk},
      // PUSH_PROMISE.
      {"PushPromiseToServer", raw_frame(T::kPushPromise, kFlagEndHeaders, 1, be32(2)), conn(kProtocol)},
      {"PushPromiseToClient", raw_frame(T::kPushPromise, kFlagEndHeaders, 1, be32(2) + "b"), kOk, Role::kClient},
      {"PushPromiseTooShort", raw_frame(T::kPushPromise, 0, 1, "abc"), conn(kFrameSize), Role::kClient},
      {"PushPromiseOfStreamZero", raw_frame(T::kPushPromise, 0, 1, be32(0x80000000)), conn(kProtocol), Role::kClient},
      // PRIORITY.
      {"PriorityLengthFour", raw_frame(T::kPriority, 0, 1, "abcd"), strm(kFrameSize)},
      {"PriorityLengthSix", raw_frame(T::kPriority, 0, 1, prio(3, 0) + "x"), strm(kFrameSize)},
      {"PriorityDependsOnItself", raw_frame(T::kPriority, 0, 5, prio(5, 0)), strm(kProtocol)},
      {"PriorityValid", raw_frame(T::kPriority, 0, 5, prio(3, 0)), kOk},
      // RST_STREAM.
      {"RstStreamLengthThree", raw_frame(T::kRstStream, 0, 1, "abc"), conn(kFrameSize)},
      {"RstStreamLengthFive", raw_frame(T::kRstStream, 0, 1, "abcde"), conn(kFrameSize)},
      // SETTINGS.
      {"SettingsLengthNotMultipleOfSix", raw_frame(T::kSettings, 0, 0, setting(1, 0) + "x"), conn(kFrameSize)},
      {"SettingsAckWithPayload", raw_frame(T::kSettings, kFlagAck, 0, setting(1, 0)), conn(kFrameSize)},
      {"SettingsAckEmpty", raw_frame(T::kSettings, kFlagAck, 0, ""), kOk},
      {"EnablePushTwo", raw_frame(T::kSettings, 0, 0, setting(2, 2)), conn(kProtocol)},
      {"EnablePushOneToServer", raw_frame(T::kSettings, 0, 0, setting(2, 1)), kOk},
      {"EnablePushOneToClient", raw_frame(T::kSettings, 0, 0, setting(2, 1)), conn(kProtocol), Role::kClient},
      {"EnablePushZeroToClient", raw_frame(T::kSettings, 0, 0, setting(2, 0)), kOk, Role::kClient},
      {"InitialWindowSizeMax", raw_frame(T::kSettings, 0, 0, setting(4, 0x7fffffff)), kOk},
      {"InitialWindowSizePastMax", raw_frame(T::kSettings, 0, 0, setting(4, 0x80000000)),
       conn(ErrorCode::kFlowControlError)},
      {"MaxFrameSizeBelowDefault", raw_frame(T::kSettings, 0, 0, setting(5, 16383)), conn(kProtocol)},
      {"MaxFrameSizeDefault", raw_frame(T::kSettings, 0, 0, setting(5, 16384)), kOk},
      {"MaxFrameSizeLargest", raw_frame(T::kSettings, 0, 0, setting(5, 0xffffff)), kOk},
      {"MaxFrameSizePastLargest", raw_frame(T::kSettings, 0, 0, setting(5, 0x1000000)), conn(kProtocol)},
      {"EnableConnectProtocolTwo", raw_frame(T::kSettings, 0, 0, setting(8, 2)), conn(kProtocol)},
      {"NoRfc7540PrioritiesTwo", raw_frame(T::kSettings, 0, 0, setting(9, 2)), conn(kProtocol)},
      {"UnknownSettingIgnored", raw_frame(T::kSettings, 0, 0, setting(0x99, 0xffffffff) + setting(7, 9)), kOk},
      {"BadValueAfterGoodOnes", raw_frame(T::kSettings, 0, 0, setting(3, 100) + setting(5, 1)), conn(kProtocol)},
      // PING, GOAWAY, WINDOW_UPDATE.
      {"PingLengthSeven", raw_frame(T::kPing, 0, 0, ping8.substr(1)), conn(kFrameSize)},
      {"PingLengthNine", raw_frame(T::kPing, 0, 0, ping8 + "x"), conn(kFrameSize)},
      {"GoawayLengthSeven", raw_frame(T::kGoaway, 0, 0, "abcdefg"), conn(kFrameSize)},
      {"GoawayWithDebugData", raw_frame(T::kGoaway, 0, 0, be32(1) + be32(0) + "why"), kOk},
      {"WindowUpdateLengthThree", raw_frame(T::kWindowUpdate, 0, 1, "abc"), conn(kFrameSize)},
      {"WindowUpdateLengthFive", raw_frame(T::kWindowUpdate, 0, 0, be32(1) + "x"), conn(kFrameSize)},
      {"WindowUpdateZeroOnStream", raw_frame(T::kWindowUpdate, 0, 1, be32(0)), strm(kProtocol)},
      {"WindowUpdateZeroOnConnection", raw_frame(T::kWindowUpdate, 0, 0, be32(0)), conn(kProtocol)},
      {"WindowUpdateReservedBitOnlyIsZero", raw_frame(T::kWindowUpdate, 0, 1, be32(0x80000000)), strm(kProtocol)},
      // Unknown types are returned, for the caller to skip.
      {"UnknownTypeIgnored", raw_frame(0xfa, 0xff, 0, "anything"), kOk},
  };
}

class FrameRule : public ::testing::TestWithParam<Rule> {};

TEST_P(FrameRule, HasItsCodeAndScope) {
  const Rule& rule = GetParam();
  const Frame frame = only_frame(rule.frame);
  EXPECT_EQ(decode_any(frame, rule.self, nullptr), rule.expected);
}

INSTANTIATE_TEST_SUITE_P(Rfc9113, FrameRule, ::testing::ValuesIn(rules()),
                         [](const ::testing::TestParamInfo<Rule>& p) { return std::string(p.param.name); });

TEST(FrameReader, NeedsNineBytesForAHeader) {
  const std::string f = raw_frame(T::kData, 0, 1, "hello");
  for (size_t n = 0; n < kFrameHeaderSize; ++n) {
    ReadResult r = read_frame(std::string_view(f).substr(0, n), kDefaultMaxFrameSize);
    EXPECT_EQ(r.status, ReadStatus::kNeedMore);
    EXPECT_EQ(r.size, kFrameHeaderSize);
  }
}

TEST(FrameReader, NeedMoreSaysTheWholeFrameSize) {
  const std::string f = raw_frame(T::kData, kFlagEndStream, 1, "hello");
  ReadResult r = read_frame(std::string_view(f).substr(0, 12), kDefaultMaxFrameSize);
  EXPECT_EQ(r.status, ReadStatus::kNeedMore);
  EXPECT_EQ(r.size, f.size());
  EXPECT_EQ(r.frame.header.length, 5u);
  EXPECT_TRUE(r.frame.header.has(kFlagEndStream));
}

TEST(FrameReader, ReturnsTheFrameAndNotWhatFollows) {
  const std::string two = raw_frame(T::kData, 0, 1, "ab") + raw_frame(T::kData, 0, 3, "cd");
  ReadResult r = read_frame(two, kDefaultMaxFrameSize);
  ASSERT_EQ(r.status, ReadStatus::kFrame);
  EXPECT_EQ(r.size, kFrameHeaderSize + 2);
  EXPECT_EQ(r.frame.payload, "ab");
  EXPECT_EQ(r.frame.payload.data(), two.data() + kFrameHeaderSize);
}

TEST(FrameReader, RefusesAFrameOverOurMaxFrameSizeFromItsHeader) {
  // Only the header is there: the error comes before any payload.
  std::string header = raw_frame(T::kData, 0, 1, std::string(kDefaultMaxFrameSize + 1, 'x')).substr(0, 9);
  ReadResult r = read_frame(header, kDefaultMaxFrameSize);
  EXPECT_EQ(r.status, ReadStatus::kError);
  EXPECT_EQ(r.error, conn(kFrameSize));
  EXPECT_EQ(r.frame.header.length, kDefaultMaxFrameSize + 1);
  // Exactly the limit is fine, and a raised limit admits more.
  const std::string limit = raw_frame(T::kData, 0, 1, std::string(kDefaultMaxFrameSize, 'x'));
  EXPECT_EQ(read_frame(limit, kDefaultMaxFrameSize).status, ReadStatus::kFrame);
  EXPECT_EQ(read_frame(header, kDefaultMaxFrameSize + 1).status, ReadStatus::kNeedMore);
}

TEST(FrameReader, IgnoresTheReservedBitOfStreamIds) {
  EXPECT_EQ(only_frame(raw_frame(T::kData, 0, 0x80000001, "x")).header.stream_id, 1u);
  // A DATA frame on "stream 0 with the reserved bit" is on stream 0.
  EXPECT_EQ(decode_any(only_frame(raw_frame(T::kData, 0, 0x80000000, "x")), Role::kServer, nullptr),
            conn(kProtocol));
  GoawayFrame g;
  ASSERT_TRUE(decode_goaway(only_frame(raw_frame(T::kGoaway, 0, 0, be32(0x80000007) + be32(2))), g).ok());
  EXPECT_EQ(g.last_stream_id, 7u);
  WindowUpdateFrame w;
  ASSERT_TRUE(decode_window_update(only_frame(raw_frame(T::kWindowUpdate, 0, 1, be32(0x80000005))), w).ok());
  EXPECT_EQ(w.increment, 5u);
}

TEST(FrameReader, IgnoresFlagsATypeDoesNotDefine) {
  DataFrame d;
  const std::string f = raw_frame(T::kData, 0xf6, 1, "abc");
  ASSERT_TRUE(decode_data(only_frame(f), d).ok());
  EXPECT_EQ(d.data, "abc");
  EXPECT_FALSE(d.end_stream);
  PingFrame p;
  ASSERT_TRUE(decode_ping(only_frame(raw_frame(T::kPing, 0xfe, 0, std::string(8, '\1'))), p).ok());
  EXPECT_FALSE(p.ack);
  EXPECT_EQ(p.opaque, 0x0101010101010101u);
}

TEST(FrameReader, DataCountsPaddingForFlowControl) {
  DataFrame d;
  const std::string f = raw_frame(T::kData, kFlagPadded | kFlagEndStream, 1, "\x04" "ab\0\0\0\0"s);
  ASSERT_TRUE(decode_data(only_frame(f), d).ok());
  EXPECT_EQ(d.data, "ab");
  EXPECT_EQ(d.flow_length, 7u);
  EXPECT_TRUE(d.end_stream);
}

TEST(FrameReader, HeadersStreamErrorStillGivesTheBlock) {
  // The block must reach HPACK even though the stream is reset.
  HeadersFrame h;
  const std::string f = raw_frame(T::kHeaders, kFlagPriority | kFlagPadded, 3, "\x02" + prio(0x80000003, 9) + "blk\0\0"s);
  EXPECT_EQ(decode_headers(only_frame(f), h), strm(kProtocol));
  EXPECT_EQ(h.block, "blk");
  EXPECT_EQ(h.priority, (Priority{3, 10, true}));
  EXPECT_FALSE(h.end_headers);
}

TEST(FrameReader, SettingsIterateInOrderWithUnknownIds) {
  SettingsFrame s;
  const std::string f = raw_frame(T::kSettings, 0, 0, setting(1, 0) + setting(0x42, 7) + setting(1, 4096));
  ASSERT_TRUE(decode_settings(only_frame(f), Role::kServer, s).ok());
  std::vector<Setting> got(s.begin(), s.end());
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(got, (std::vector<Setting>{{SettingId::kHeaderTableSize, 0},
                                       {static_cast<SettingId>(0x42), 7},
                                       {SettingId::kHeaderTableSize, 4096}}));
}

TEST(Preface, MatchesWholeAndInPartsAndFailsOnTheFirstWrongByte) {
  EXPECT_EQ(match_preface(""), PrefaceStatus::kNeedMore);
  EXPECT_EQ(match_preface("PRI * HTTP/2"), PrefaceStatus::kNeedMore);
  EXPECT_EQ(match_preface(kClientPreface), PrefaceStatus::kMatch);
  EXPECT_EQ(match_preface(std::string(kClientPreface) + "more"), PrefaceStatus::kMatch);
  EXPECT_EQ(match_preface("GET / HTTP/1.1\r\n"), PrefaceStatus::kMismatch);
  EXPECT_EQ(match_preface("PRX"), PrefaceStatus::kMismatch);
}

// The CONTINUATION sequence (section 6.10), frame header by frame header.
FrameError run(ContinuationCheck& check, std::initializer_list<FrameHeader> headers) {
  for (const FrameHeader& h : headers) {
    if (FrameError e = check.check(h); !e.ok()) return e;
  }
  return {};
}

TEST(ContinuationCheck, FollowsABlockToEndHeaders) {
  ContinuationCheck c;
  EXPECT_EQ(run(c, {{10, T::kHeaders, 0, 1}, {20, T::kContinuation, 0, 1}}), kOk);
  EXPECT_TRUE(c.in_block());
  EXPECT_EQ(c.check({0, T::kContinuation, kFlagEndHeaders, 1}), kOk);
  EXPECT_FALSE(c.in_block());
  EXPECT_EQ(c.block_bytes(), 30u);
  EXPECT_EQ(c.block_frames(), 3u);
  EXPECT_EQ(run(c, {{5, T::kData, 0, 1}, {1, T::kHeaders, kFlagEndHeaders, 3}, {8, T::kPing, 0, 0}}), kOk);
  EXPECT_EQ(run(c, {{4, T::kPushPromise, 0, 3}, {1, T::kContinuation, kFlagEndHeaders, 3}}), kOk);
}

TEST(ContinuationCheck, RefusesAnotherFrameInsideABlock) {
  ContinuationCheck c;
  EXPECT_EQ(run(c, {{10, T::kHeaders, 0, 1}, {8, T::kPing, 0, 0}}), conn(kProtocol));
}

TEST(ContinuationCheck, RefusesAnUnknownTypeInsideABlock) {
  ContinuationCheck c;
  EXPECT_EQ(run(c, {{10, T::kHeaders, 0, 1}, {0, static_cast<FrameType>(0xfa), 0, 0}}), conn(kProtocol));
}

TEST(ContinuationCheck, RefusesAContinuationOnAnotherStream) {
  ContinuationCheck c;
  EXPECT_EQ(run(c, {{10, T::kHeaders, 0, 1}, {1, T::kContinuation, kFlagEndHeaders, 3}}), conn(kProtocol));
}

TEST(ContinuationCheck, RefusesAContinuationOutsideABlock) {
  ContinuationCheck a;
  EXPECT_EQ(run(a, {{1, T::kContinuation, kFlagEndHeaders, 1}}), conn(kProtocol));
  ContinuationCheck b;
  EXPECT_EQ(run(b, {{1, T::kHeaders, kFlagEndHeaders, 1}, {1, T::kContinuation, 0, 1}}), conn(kProtocol));
}

// One frame of every type, padded where a type allows, and a block in
// three pieces; the server's view (PUSH_PROMISE would be an error).
std::string every_frame(Role self) {
  std::string s = raw_frame(T::kSettings, 0, 0, setting(3, 100) + setting(4, 1 << 20) + setting(0x77, 1));
  s += raw_frame(T::kSettings, kFlagAck, 0, "");
  s += raw_frame(T::kHeaders, kFlagPadded | kFlagPriority, 1, "\x03" + prio(0x80000000, 15) + "h1\0\0\0"s);
  s += raw_frame(T::kContinuation, 0, 1, "h2");
  s += raw_frame(T::kContinuation, kFlagEndHeaders, 1, "h3");
  s += raw_frame(T::kData, kFlagPadded, 1, "\x02" "body\0\0"s);
  s += raw_frame(T::kData, 0, 1, "");
  s += raw_frame(0xfa, 0xff, 0, "extension");
  s += raw_frame(T::kPriority, 0, 3, prio(1, 200));
  s += raw_frame(T::kWindowUpdate, 0, 1, be32(1000));
  s += raw_frame(T::kData, kFlagEndStream, 1, "end");
  s += raw_frame(T::kPing, kFlagAck, 0, "12345678");
  if (self == Role::kClient) s += raw_frame(T::kPushPromise, kFlagPadded | kFlagEndHeaders, 1, "\x01" + be32(2) + "pp!\0"s);
  s += raw_frame(T::kHeaders, kFlagEndHeaders | kFlagEndStream, 5, "h");
  s += raw_frame(T::kRstStream, 0, 5, be32(8));
  s += raw_frame(T::kGoaway, 0, 0, be32(5) + be32(0) + "bye");
  return s;
}

TEST(FrameReader, ReadsEveryTypeAsExpected) {
  const std::vector<std::string> want = {
      "SETTINGS 0 ack=0 3:100 4:1048576 119:1",
      "SETTINGS 0 ack=1",
      "HEADERS 1 es=0 eh=0 dep=0 w=16 ex=1 'h1'",
      "CONTINUATION 1 eh=0 'h2'",
      "CONTINUATION 1 eh=1 'h3'",
      "DATA 1 es=0 flow=7 'body'",
      "DATA 1 es=0 flow=0 ''",
      "unknown 250 0",
      "PRIORITY 3 dep=1 w=201 ex=0",
      "WINDOW_UPDATE 1 +1000",
      "DATA 1 es=1 flow=3 'end'",
      "PING 0 ack=1 3544952156018063160",
      "HEADERS 5 es=1 eh=1 'h'",
      "RST_STREAM 5 CANCEL",
      "GOAWAY 0 last=5 NO_ERROR 'bye'",
  };
  EXPECT_EQ(read_pieces(every_frame(Role::kServer), {}), want);
  std::vector<std::string> client = want;
  client.insert(client.begin() + 12, "PUSH_PROMISE 1 eh=1 promised=2 'pp!'");
  EXPECT_EQ(read_pieces(every_frame(Role::kClient), {}, Role::kClient), client);
}

TEST(FrameReader, SameFramesWhereverTheInputIsCut) {
  for (Role self : {Role::kServer, Role::kClient}) {
    const std::string bytes = every_frame(self);
    const std::vector<std::string> whole = read_pieces(bytes, {}, self);
    std::vector<size_t> every;
    for (size_t cut = 0; cut <= bytes.size(); ++cut) {
      EXPECT_EQ(read_pieces(bytes, {cut}, self), whole) << "cut at " << cut;
      every.push_back(cut);
    }
    EXPECT_EQ(read_pieces(bytes, every, self), whole) << "one byte at a time";
  }
}

TEST(FrameReader, StopsAtAnErrorWhereverTheInputIsCut) {
  const std::string bytes = raw_frame(T::kPing, 0, 0, "12345678") + raw_frame(T::kData, 0, 1, "x") +
                            raw_frame(T::kHeaders, 0, 1, "a") + raw_frame(T::kPing, 0, 0, "12345678");
  const std::vector<std::string> want = {"PING 0 ack=0 3544952156018063160", "DATA 1 es=0 flow=1 'x'",
                                         "HEADERS 1 es=0 eh=0 'a'", "error connection PROTOCOL_ERROR"};
  for (size_t cut = 0; cut <= bytes.size(); ++cut) EXPECT_EQ(read_pieces(bytes, {cut}), want) << cut;
}

}  // namespace
}  // namespace tern::http2
