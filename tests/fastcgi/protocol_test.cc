#include "fastcgi/protocol.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace tern::fastcgi {
namespace {

using namespace std::string_literals;

std::string pattern(size_t len, uint32_t seed = 1) {
  std::string s(len, '\0');
  uint32_t x = seed;
  for (auto& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

// A record built by hand, independently of the encoders.
std::string record(uint8_t type, uint16_t id, std::string_view content, uint8_t padding = 0,
                   uint8_t version = 1) {
  std::string r{static_cast<char>(version),
                static_cast<char>(type),
                static_cast<char>(id >> 8),
                static_cast<char>(id),
                static_cast<char>(content.size() >> 8),
                static_cast<char>(content.size()),
                static_cast<char>(padding),
                '\0'};
  r.append(content);
  r.append(padding, '\xee');  // a receiver must not care what padding holds
  return r;
}

std::string record(RecordType type, uint16_t id, std::string_view content, uint8_t padding = 0) {
  return record(static_cast<uint8_t>(type), id, content, padding);
}

std::string end_request(uint16_t id, uint32_t app_status, ProtocolStatus status) {
  std::string body{static_cast<char>(app_status >> 24), static_cast<char>(app_status >> 16),
                   static_cast<char>(app_status >> 8),  static_cast<char>(app_status),
                   static_cast<char>(status),           '\0', '\0', '\0'};
  return record(RecordType::kEndRequest, id, body);
}

// The records in encoder output, split by reading the headers by hand.
struct Record {
  uint8_t version = 0;
  RecordType type{};
  uint16_t id = 0;
  std::string content;
  std::string padding;
};

std::vector<Record> split_records(std::string_view bytes) {
  std::vector<Record> records;
  while (bytes.size() >= kHeaderSize) {
    auto u = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
    Record r;
    r.version = u(0);
    r.type = static_cast<RecordType>(u(1));
    r.id = static_cast<uint16_t>(u(2) << 8 | u(3));
    size_t content = static_cast<size_t>(u(4) << 8 | u(5));
    size_t padding = u(6);
    EXPECT_EQ(u(7), 0) << "reserved byte";
    if (bytes.size() < kHeaderSize + content + padding) break;
    r.content = bytes.substr(kHeaderSize, content);
    r.padding = bytes.substr(kHeaderSize + content, padding);
    records.push_back(std::move(r));
    bytes.remove_prefix(kHeaderSize + content + padding);
  }
  EXPECT_TRUE(bytes.empty()) << bytes.size() << " bytes left after the last whole record";
  return records;
}

// Checks that `bytes` is one stream of `type` for request `id`, as the
// encoders must write it, and returns its content.
std::string stream_content(std::string_view bytes, RecordType type, uint16_t id) {
  std::vector<Record> records = split_records(bytes);
  std::string content;
  for (size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    EXPECT_EQ(r.version, 1);
    EXPECT_EQ(r.type, type);
    EXPECT_EQ(r.id, id);
    EXPECT_EQ((r.content.size() + r.padding.size()) % 8, 0u) << "record " << i;
    EXPECT_LT(r.padding.size(), 8u) << "record " << i;
    EXPECT_EQ(r.padding, std::string(r.padding.size(), '\0')) << "record " << i;
    EXPECT_EQ(r.content.empty(), i + 1 == records.size()) << "only the last record is empty";
    content += r.content;
  }
  return content;
}

std::vector<std::pair<std::string, std::string>> pairs_of(std::string_view data, bool* ok) {
  std::vector<std::pair<std::string, std::string>> pairs;
  *ok = decode_pairs(data, [&](std::string_view n, std::string_view v) {
    pairs.emplace_back(n, v);
  });
  return pairs;
}

// ---- Encoders --------------------------------------------------------------

TEST(FastcgiEncoder, WritesBeginRequest) {
  net::Buffer out;
  append_begin_request(out, 1, Role::kResponder, true);
  append_begin_request(out, 0x1234, Role::kAuthorizer, false);
  append_begin_request(out, 0xfffe, Role::kFilter, true);
  EXPECT_EQ(out.view(),
            "\x01\x01\x00\x01\x00\x08\x00\x00"
            "\x00\x01\x01\x00\x00\x00\x00\x00"
            "\x01\x01\x12\x34\x00\x08\x00\x00"
            "\x00\x02\x00\x00\x00\x00\x00\x00"
            "\x01\x01\xff\xfe\x00\x08\x00\x00"
            "\x00\x03\x01\x00\x00\x00\x00\x00"s);
}

TEST(FastcgiEncoder, WritesAbortRequest) {
  net::Buffer out;
  append_abort_request(out, 0x1234);
  EXPECT_EQ(out.view(), "\x01\x02\x12\x34\x00\x00\x00\x00"s);
}

TEST(FastcgiEncoder, WritesStreamRecordsPaddedToEightBytes) {
  net::Buffer out;
  append_stream(out, RecordType::kStdin, 1, "hello");
  append_stream(out, RecordType::kStdin, 1, "12345678");
  append_stream(out, RecordType::kData, 0x0102, "x");
  append_stream(out, RecordType::kStdin, 1, {});
  EXPECT_EQ(out.view(),
            "\x01\x05\x00\x01\x00\x05\x03\x00" "hello\0\0\0"
            "\x01\x05\x00\x01\x00\x08\x00\x00" "12345678"
            "\x01\x08\x01\x02\x00\x01\x07\x00" "x\0\0\0\0\0\0\0"
            "\x01\x05\x00\x01\x00\x00\x00\x00"s);
}

TEST(FastcgiEncoder, SplitsLongStreamsIntoMaximalRecords) {
  for (size_t size : {kMaxContent - 1, kMaxContent, kMaxContent + 1, 3 * kMaxContent + 3395}) {
    const std::string data = pattern(size, static_cast<uint32_t>(size));
    net::Buffer out;
    append_stream(out, RecordType::kStdin, 7, data);
    append_stream(out, RecordType::kStdin, 7, {});
    std::vector<Record> records = split_records(out.view());
    const size_t full = size / kMaxContent;
    const size_t rest = size % kMaxContent;
    ASSERT_EQ(records.size(), full + (rest > 0) + 1) << size;
    for (size_t i = 0; i < full; ++i) {
      EXPECT_EQ(records[i].content.size(), kMaxContent);
      EXPECT_EQ(records[i].padding, "\0"s);
    }
    if (rest > 0) {
      EXPECT_EQ(records[full].content.size(), rest);
    }
    EXPECT_EQ(stream_content(out.view(), RecordType::kStdin, 7), data) << size;
  }
  // 3 * 65535 + 3395: three records of 65535 + 1, and 3395 + 5.
  net::Buffer out;
  append_stream(out, RecordType::kStdout, 1, pattern(3 * kMaxContent + 3395));
  EXPECT_EQ(out.readable_bytes(), 3 * (8 + 65536) + 8 + 3400u);
  EXPECT_EQ(out.view().substr(0, 8), "\x01\x06\x00\x01\xff\xff\x01\x00"s);
  EXPECT_EQ(out.view().substr(3 * (8 + 65536), 8), "\x01\x06\x00\x01\x0d\x43\x05\x00"s);
}

TEST(FastcgiEncoder, WritesZeroPaddingOverOldBufferBytes) {
  net::Buffer out;
  out.append(std::string(4096, '\xff'));
  out.retrieve_all();  // the storage still holds 0xff
  append_stream(out, RecordType::kStdin, 1, "abc");
  ParamsWriter params(out, 1);
  params.add("A", "b");
  params.finish();
  append_begin_request(out, 1, Role::kResponder, false);
  EXPECT_EQ(out.view(),
            "\x01\x05\x00\x01\x00\x03\x05\x00" "abc\0\0\0\0\0"
            "\x01\x04\x00\x01\x00\x04\x04\x00" "\x01\x01" "Ab\0\0\0\0"
            "\x01\x04\x00\x01\x00\x00\x00\x00"
            "\x01\x01\x00\x01\x00\x08\x00\x00" "\x00\x01\x00\x00\x00\x00\x00\x00"s);
}

TEST(FastcgiEncoder, AppendsAfterExistingBytes) {
  net::Buffer out;
  out.append("GET");
  append_abort_request(out, 9);
  EXPECT_EQ(out.view(), "GET\x01\x02\x00\x09\x00\x00\x00\x00"s);
}

TEST(ParamsWriter, WritesPairsAndTheEmptyRecord) {
  net::Buffer out;
  ParamsWriter params(out, 1);
  params.add("REQUEST_METHOD", "GET");
  params.add("QUERY_STRING", "");
  params.finish();
  // 2 + 14 + 3 + 2 + 12 + 0 = 33 bytes of content, 7 of padding.
  EXPECT_EQ(out.view(),
            "\x01\x04\x00\x01\x00\x21\x07\x00"
            "\x0e\x03REQUEST_METHODGET"
            "\x0c\x00QUERY_STRING"
            "\0\0\0\0\0\0\0"
            "\x01\x04\x00\x01\x00\x00\x00\x00"s);
}

TEST(ParamsWriter, WritesOnlyTheEmptyRecordWithoutPairs) {
  net::Buffer out;
  ParamsWriter params(out, 0x0203);
  params.finish();
  EXPECT_EQ(out.view(), "\x01\x04\x02\x03\x00\x00\x00\x00"s);
}

TEST(ParamsWriter, EncodesOneAndFourByteLengths) {
  const std::pair<size_t, std::string> cases[] = {
      {0, "\x00"s},
      {1, "\x01"s},
      {127, "\x7f"s},
      {128, "\x80\x00\x00\x80"s},
      {65535, "\x80\x00\xff\xff"s},
      {70000, "\x80\x01\x11\x70"s},
  };
  for (const auto& [len, prefix] : cases) {
    const std::string big = pattern(len, static_cast<uint32_t>(len));
    // As a value, then as a name.
    net::Buffer out;
    ParamsWriter params(out, 1);
    params.add("n", big);
    params.add(big, "v");
    params.finish();
    std::string content = stream_content(out.view(), RecordType::kParams, 1);
    EXPECT_EQ(content, "\x01" + prefix + "n" + big + prefix + "\x01" + big + "v") << len;
    bool ok = false;
    auto pairs = pairs_of(content, &ok);
    EXPECT_TRUE(ok);
    ASSERT_EQ(pairs.size(), 2u);
    EXPECT_EQ(pairs[0], std::make_pair("n"s, big));
    EXPECT_EQ(pairs[1], std::make_pair(big, "v"s));
  }
}

TEST(ParamsWriter, ContinuesALargePairInTheNextRecord) {
  const std::string value = pattern(70000);
  net::Buffer out;
  ParamsWriter params(out, 1);
  params.add("V", value);
  params.finish();
  // 1 + 4 + 1 + 70000 = 70006 bytes: 65535 + 1 padding, then 4471 + 1.
  std::vector<Record> records = split_records(out.view());
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(out.view().substr(0, 8), "\x01\x04\x00\x01\xff\xff\x01\x00"s);
  EXPECT_EQ(out.view().substr(8 + 65536, 8), "\x01\x04\x00\x01\x11\x77\x01\x00"s);
  EXPECT_EQ(records[0].content, "\x01\x80\x01\x11\x70V"s + value.substr(0, 65535 - 6));
  EXPECT_EQ(records[1].content, value.substr(65535 - 6));
  EXPECT_EQ(records[2].content, "");
  EXPECT_EQ(out.readable_bytes(), 8 + 65536 + 8 + 4472 + 8u);
}

TEST(ParamsWriter, SplitsALengthPrefixAcrossRecords) {
  // The first pair fills 65533 bytes, so the second pair's 4-byte value
  // length starts 2 bytes before the end of the record.
  const std::string first = pattern(65533 - 6);
  const std::string second = pattern(300, 2);
  net::Buffer out;
  ParamsWriter params(out, 1);
  params.add("A", first);
  params.add("B", second);
  params.finish();
  std::vector<Record> records = split_records(out.view());
  ASSERT_EQ(records.size(), 3u);
  ASSERT_EQ(records[0].content.size(), kMaxContent);
  EXPECT_EQ(records[0].content.substr(65533), "\x01\x80"s);
  EXPECT_EQ(records[1].content, "\x00\x01\x2c"s + "B" + second);
  bool ok = false;
  auto pairs = pairs_of(stream_content(out.view(), RecordType::kParams, 1), &ok);
  EXPECT_TRUE(ok);
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0], std::make_pair("A"s, first));
  EXPECT_EQ(pairs[1], std::make_pair("B"s, second));
}

TEST(ParamsWriter, FillsARecordExactly) {
  // 1 + 4 + 1 + 65529 = 65535: the record closes full, and the next pair
  // opens a new one.
  net::Buffer out;
  ParamsWriter params(out, 1);
  params.add("A", pattern(65529));
  params.add("B", "c");
  params.finish();
  std::vector<Record> records = split_records(out.view());
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].content.size(), kMaxContent);
  EXPECT_EQ(records[1].content, "\x01\x01" "Bc"s);
  EXPECT_EQ(records[2].content, "");
}

TEST(ParamsWriter, SurvivesBufferGrowthAndSliding) {
  // A small buffer whose front was consumed: the writer's appends first
  // slide the readable bytes back, then reallocate, while a record is open.
  net::Buffer out(64);
  out.append("0123456789");
  out.retrieve(6);
  std::vector<std::pair<std::string, std::string>> want;
  ParamsWriter params(out, 3);
  for (int i = 0; i < 300; ++i) {
    want.emplace_back("NAME_" + std::to_string(i), pattern(static_cast<size_t>(i) * 37, i));
    params.add(want.back().first, want.back().second);
  }
  params.finish();
  ASSERT_EQ(out.view().substr(0, 4), "6789");
  bool ok = false;
  auto pairs = pairs_of(stream_content(out.view().substr(4), RecordType::kParams, 3), &ok);
  EXPECT_TRUE(ok);
  EXPECT_EQ(pairs, want);
}

// ---- decode_pairs ----------------------------------------------------------

TEST(DecodePairs, DecodesOneAndFourByteLengths) {
  bool ok = false;
  auto pairs = pairs_of("\x03\x01" "abcX" "\x80\x00\x00\x02\x00" "xy" "\x00\x00"s, &ok);
  EXPECT_TRUE(ok);
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(pairs, (std::vector<P>{{"abc", "X"}, {"xy", ""}, {"", ""}}));
}

TEST(DecodePairs, AcceptsEmptyInput) {
  bool ok = false;
  EXPECT_TRUE(pairs_of("", &ok).empty());
  EXPECT_TRUE(ok);
}

TEST(DecodePairs, RejectsTruncatedInputAfterReportingEarlierPairs) {
  for (std::string bad : {"\x01"s, "\x01\x01" "a"s, "\x80\x00\x00"s, "\x01\x80\x00\x00"s,
                          "\x80\x00\x01\x00\x00"s + std::string(255, 'n'),
                          "\x02\x80\x00\x00\x05" "ab" "1234"s, "\xff\xff\xff\xff\x00"s}) {
    bool ok = true;
    auto pairs = pairs_of("\x01\x01" "ab"s + bad, &ok);
    EXPECT_FALSE(ok) << testing::PrintToString(bad);
    ASSERT_EQ(pairs.size(), 1u);
    EXPECT_EQ(pairs[0], std::make_pair("a"s, "b"s));
  }
}

// ---- RecordParser ----------------------------------------------------------

// An event with its data copied, so that events from different deliveries
// compare equal. For kError, data holds the reason.
struct Ev {
  Event::Kind kind = Event::kNeedMore;
  uint16_t id = 0;
  RecordType stream{};
  std::string data;
  uint32_t app_status = 0;
  ProtocolStatus protocol_status = ProtocolStatus::kRequestComplete;
  bool operator==(const Ev&) const = default;
};

void PrintTo(const Ev& e, std::ostream* os) {
  *os << "{kind " << int{e.kind} << " id " << e.id << " stream " << int(e.stream) << " data "
      << testing::PrintToString(e.data.size() > 40 ? e.data.substr(0, 40) + "..." : e.data)
      << " size " << e.data.size() << " app " << e.app_status << " proto "
      << int(e.protocol_status) << "}";
}

constexpr auto kOk = ProtocolStatus::kRequestComplete;

Ev stdout_ev(uint16_t id, std::string data) {
  return {Event::kStdout, id, RecordType::kStdout, std::move(data), 0, kOk};
}
Ev stderr_ev(uint16_t id, std::string data) {
  return {Event::kStderr, id, RecordType::kStderr, std::move(data), 0, kOk};
}
Ev stream_end(uint16_t id, RecordType stream) {
  return {Event::kStreamEnd, id, stream, "", 0, kOk};
}
Ev end_ev(uint16_t id, uint32_t app_status, ProtocolStatus status) {
  return {Event::kEndRequest, id, RecordType::kEndRequest, "", app_status, status};
}
Ev other_ev(uint16_t id, RecordType type, std::string data = {}) {
  return {Event::kOther, id, type, std::move(data), 0, kOk};
}
Ev error_ev(std::string reason) {
  return {Event::kError, 0, RecordType{}, std::move(reason), 0, kOk};
}

struct Parsed {
  std::vector<Ev> events;  // adjacent content pieces of one stream merged
  size_t consumed = 0;
  std::string problem;     // a broken promise of next(), if any
};

// Feeds the input as a connection would: pieces ending at each offset of
// `arrivals` go into a pending buffer, and what next() consumes is erased.
Parsed parse(std::string_view input, const std::vector<size_t>& arrivals) {
  RecordParser parser;
  Parsed out;
  std::string pending;
  size_t fed = 0;
  auto is_piece = [](const Ev& e) {
    return e.kind == Event::kStdout || e.kind == Event::kStderr ||
           (e.kind == Event::kOther && !e.data.empty());
  };
  auto add = [&](Ev e) {
    if (is_piece(e) && !out.events.empty()) {
      Ev& last = out.events.back();
      if (last.kind == e.kind && last.id == e.id && last.stream == e.stream && !last.data.empty()) {
        last.data += e.data;
        return;
      }
    }
    out.events.push_back(std::move(e));
  };
  for (size_t arrived : arrivals) {
    pending.append(input.substr(fed, arrived - fed));
    fed = arrived;
    for (;;) {
      size_t used = 99999;
      Event e = parser.next(pending, &used);
      if (used > pending.size()) out.problem = "used beyond input";
      const char* begin = pending.data();
      if (!e.data.empty() &&
          (e.data.data() < begin || e.data.data() + e.data.size() > begin + used)) {
        out.problem = "data outside the consumed input";
      }
      out.consumed += used;
      if (e.kind == Event::kNeedMore) {
        if (used != pending.size()) out.problem = "kNeedMore left input unconsumed";
        pending.clear();
        break;
      }
      if ((e.kind == Event::kStdout || e.kind == Event::kStderr) && e.data.empty()) {
        out.problem = "empty content piece";
      }
      if (e.kind == Event::kError) {
        add(error_ev(std::string(parser.error())));
        size_t again = 1;
        if (parser.next(pending.substr(used), &again).kind != Event::kError || again != 0) {
          out.problem = "parser did not stay failed";
        }
        return out;
      }
      Ev ev{e.kind, e.request_id, e.stream, std::string(e.data), e.app_status, e.protocol_status};
      if (!is_piece(ev) && !parser.at_record_boundary()) {
        out.problem = "not at a record boundary after a record's end";
      }
      add(std::move(ev));
      pending.erase(0, used);
    }
  }
  return out;
}

Parsed parse(std::string_view input) { return parse(input, {input.size()}); }

// Whole, split in two at every offset, and one byte at a time.
std::vector<std::vector<size_t>> deliveries(size_t size) {
  std::vector<std::vector<size_t>> all{{size}};
  for (size_t cut = 0; cut <= size; ++cut) all.push_back({cut, size});
  std::vector<size_t> bytes;
  for (size_t n = 1; n <= size; ++n) bytes.push_back(n);
  if (size > 2) all.push_back(bytes);
  return all;
}

// The input must give exactly `want` however it arrives.
testing::AssertionResult parses_to(std::string_view input, const std::vector<Ev>& want) {
  for (const auto& arrivals : deliveries(input.size())) {
    Parsed p = parse(input, arrivals);
    std::string how = arrivals.size() <= 2 ? "cut at " + std::to_string(arrivals.front())
                                           : "byte by byte";
    if (!p.problem.empty()) return testing::AssertionFailure() << how << ": " << p.problem;
    if (p.events != want) {
      return testing::AssertionFailure() << how << ": got " << testing::PrintToString(p.events)
                                         << "\nwant " << testing::PrintToString(want);
    }
  }
  return testing::AssertionSuccess();
}

TEST(RecordParserHelpers, CatchWrongExpectations) {
  const std::string input = record(RecordType::kStdout, 1, "ab");
  EXPECT_TRUE(parses_to(input, {stdout_ev(1, "ab")}));
  EXPECT_FALSE(parses_to(input, {stdout_ev(1, "aB")}));
  EXPECT_FALSE(parses_to(input, {stdout_ev(2, "ab")}));
  EXPECT_FALSE(parses_to(input, {stdout_ev(1, "ab"), stream_end(1, RecordType::kStdout)}));
}

TEST(RecordParser, ParsesAResponse) {
  const std::string input = record(RecordType::kStdout, 1, "Content-type: text/html\r\n\r\n", 5) +
                            record(RecordType::kStderr, 1, "PHP Warning", 3) +
                            record(RecordType::kStdout, 1, "<p>hi</p>") +
                            record(RecordType::kStderr, 1, "") +
                            record(RecordType::kStdout, 1, "", 0) +
                            end_request(1, 0x01020304, ProtocolStatus::kRequestComplete);
  EXPECT_TRUE(parses_to(input, {
                                   stdout_ev(1, "Content-type: text/html\r\n\r\n"),
                                   stderr_ev(1, "PHP Warning"),
                                   stdout_ev(1, "<p>hi</p>"),
                                   stream_end(1, RecordType::kStderr),
                                   stream_end(1, RecordType::kStdout),
                                   end_ev(1, 0x01020304, ProtocolStatus::kRequestComplete),
                               }));
}

TEST(RecordParser, ReportsRequestIdsAndProtocolStatus) {
  const std::string input = record(RecordType::kStdout, 0xabcd, "x") +
                            end_request(0xabcd, 0xffffffff, ProtocolStatus::kOverloaded) +
                            end_request(2, 0, ProtocolStatus::kCantMpxConn) +
                            end_request(3, 7, ProtocolStatus::kUnknownRole) +
                            end_request(4, 0, static_cast<ProtocolStatus>(200));
  EXPECT_TRUE(parses_to(input, {
                                   stdout_ev(0xabcd, "x"),
                                   end_ev(0xabcd, 0xffffffff, ProtocolStatus::kOverloaded),
                                   end_ev(2, 0, ProtocolStatus::kCantMpxConn),
                                   end_ev(3, 7, ProtocolStatus::kUnknownRole),
                                   end_ev(4, 0, static_cast<ProtocolStatus>(200)),
                               }));
}

TEST(RecordParser, SkipsPaddingEverywhere) {
  const std::string input =
      record(RecordType::kStdout, 1, "", 7) + record(RecordType::kStdout, 1, "abc", 255) +
      record(RecordType::kEndRequest, 1, "\0\0\0\x05\x00\0\0\0"s, 4) +
      record(RecordType::kStderr, 1, "z", 1);
  EXPECT_TRUE(parses_to(input, {
                                   stream_end(1, RecordType::kStdout),
                                   stdout_ev(1, "abc"),
                                   end_ev(1, 5, ProtocolStatus::kRequestComplete),
                                   stderr_ev(1, "z"),
                               }));
}

TEST(RecordParser, IgnoresEndRequestContentBeyondEightBytes) {
  const std::string input =
      record(RecordType::kEndRequest, 1, "\0\0\x01\0\x03\0\0\0" "extra bytes"s, 5) +
      record(RecordType::kStdout, 2, "next");
  EXPECT_TRUE(
      parses_to(input, {end_ev(1, 256, ProtocolStatus::kUnknownRole), stdout_ev(2, "next")}));
}

TEST(RecordParser, PassesOverManagementAndUnknownTypeRecords) {
  const std::string values = "\x0e\x02" "FCGI_MAX_CONNS10" "\x0d\x01" "FCGI_MAX_REQS5"s;
  const std::string input = record(RecordType::kGetValuesResult, 0, values, 2) +
                            record(RecordType::kUnknownType, 0, "\x63\0\0\0\0\0\0\0"s) +
                            record(RecordType::kGetValuesResult, 0, "") +
                            record(RecordType::kStdout, 1, "after");
  EXPECT_TRUE(parses_to(input, {
                                   other_ev(0, RecordType::kGetValuesResult, values),
                                   other_ev(0, RecordType::kGetValuesResult),
                                   other_ev(0, RecordType::kUnknownType, "\x63\0\0\0\0\0\0\0"s),
                                   other_ev(0, RecordType::kUnknownType),
                                   other_ev(0, RecordType::kGetValuesResult),
                                   stdout_ev(1, "after"),
                               }));
  // The collected content is a run of pairs.
  bool ok = false;
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(pairs_of(values, &ok),
            (std::vector<P>{{"FCGI_MAX_CONNS", "10"}, {"FCGI_MAX_REQS", "5"}}));
  EXPECT_TRUE(ok);
}

TEST(RecordParser, RoundTripsWhatTheEncodersWrite) {
  const std::string body = pattern(3 * kMaxContent + 100);
  const std::string err = pattern(70000, 9);
  net::Buffer out;
  append_stream(out, RecordType::kStdout, 5, "Status: 200\r\n\r\n");
  append_stream(out, RecordType::kStderr, 5, err);
  append_stream(out, RecordType::kStdout, 5, body);
  append_stream(out, RecordType::kStdout, 5, {});
  append_stream(out, RecordType::kStderr, 5, {});
  out.append(end_request(5, 0, ProtocolStatus::kRequestComplete));
  Parsed p = parse(out.view());
  EXPECT_EQ(p.problem, "");
  EXPECT_EQ(p.consumed, out.readable_bytes());
  EXPECT_EQ(p.events, (std::vector<Ev>{
                          stdout_ev(5, "Status: 200\r\n\r\n"),
                          stderr_ev(5, err),
                          stdout_ev(5, body),
                          stream_end(5, RecordType::kStdout),
                          stream_end(5, RecordType::kStderr),
                          end_ev(5, 0, ProtocolStatus::kRequestComplete),
                      }));
  // Arriving in 1000-byte reads, in 4096-byte reads, and in reads of a prime
  // size that never lines up with the records.
  for (size_t step : {1000u, 4096u, 8191u}) {
    std::vector<size_t> arrivals;
    for (size_t n = step; n < out.readable_bytes(); n += step) arrivals.push_back(n);
    arrivals.push_back(out.readable_bytes());
    Parsed q = parse(out.view(), arrivals);
    EXPECT_EQ(q.problem, "") << step;
    EXPECT_EQ(q.events, p.events) << step;
  }
}

TEST(RecordParser, HandsOutContentBeforeTheRecordIsComplete) {
  const std::string input = record(RecordType::kStdout, 1, pattern(kMaxContent), 1);
  RecordParser parser;
  size_t used = 0;
  Event e = parser.next(std::string_view(input).substr(0, 5), &used);
  EXPECT_EQ(e.kind, Event::kNeedMore);
  EXPECT_EQ(used, 5u);
  EXPECT_FALSE(parser.at_record_boundary());
  e = parser.next(std::string_view(input).substr(5, 1003), &used);
  EXPECT_EQ(e.kind, Event::kStdout);
  EXPECT_EQ(used, 1003u);
  EXPECT_EQ(e.data, std::string_view(input).substr(8, 1000));
  EXPECT_EQ(e.request_id, 1);
  EXPECT_EQ(e.stream, RecordType::kStdout);
  e = parser.next({}, &used);
  EXPECT_EQ(e.kind, Event::kNeedMore);
  EXPECT_EQ(used, 0u);
  e = parser.next(std::string_view(input).substr(1008), &used);
  EXPECT_EQ(e.kind, Event::kStdout);
  EXPECT_EQ(e.data.size(), kMaxContent - 1000);
  EXPECT_EQ(used, kMaxContent - 1000);
  EXPECT_FALSE(parser.at_record_boundary());  // the padding byte is still due
  e = parser.next(std::string_view(input).substr(8 + kMaxContent), &used);
  EXPECT_EQ(e.kind, Event::kNeedMore);
  EXPECT_EQ(used, 1u);
  EXPECT_TRUE(parser.at_record_boundary());
}

TEST(RecordParser, StopsAtEachEventAndLeavesTheRest) {
  const std::string input =
      record(RecordType::kStdout, 1, "") + record(RecordType::kStdout, 1, "x");
  RecordParser parser;
  EXPECT_TRUE(parser.at_record_boundary());
  size_t used = 0;
  Event e = parser.next(input, &used);
  EXPECT_EQ(e.kind, Event::kStreamEnd);
  EXPECT_EQ(e.stream, RecordType::kStdout);
  EXPECT_EQ(used, 8u);
  EXPECT_TRUE(parser.at_record_boundary());
  e = parser.next(std::string_view(input).substr(8), &used);
  EXPECT_EQ(e.kind, Event::kStdout);
  EXPECT_EQ(e.data, "x");
  EXPECT_EQ(used, 9u);
}

TEST(RecordParser, RejectsOtherVersions) {
  for (uint8_t version : {0, 2, 255}) {
    EXPECT_TRUE(
        parses_to(record(6, 1, "abc", 0, version), {error_ev("unsupported FastCGI version")}));
  }
  EXPECT_TRUE(parses_to(record(RecordType::kStdout, 1, "ok") + record(6, 1, "abc", 0, 0),
                        {stdout_ev(1, "ok"), error_ev("unsupported FastCGI version")}));
}

TEST(RecordParser, RejectsTypesOnlyAWebServerSends) {
  for (RecordType type : {RecordType::kBeginRequest, RecordType::kAbortRequest, RecordType::kParams,
                          RecordType::kStdin, RecordType::kData, RecordType::kGetValues}) {
    EXPECT_TRUE(parses_to(record(type, 1, ""), {error_ev("record type only a web server sends")}))
        << int(type);
  }
}

TEST(RecordParser, RejectsUnknownTypes) {
  for (uint8_t type : {0, 12, 100, 255}) {
    EXPECT_TRUE(parses_to(record(type, 1, "abc"), {error_ev("unknown record type")})) << int{type};
  }
}

TEST(RecordParser, RejectsShortEndRequest) {
  for (size_t len : {0u, 1u, 7u}) {
    EXPECT_TRUE(parses_to(record(RecordType::kEndRequest, 1, std::string(len, '\0'), 8 - len),
                          {error_ev("END_REQUEST record shorter than 8 bytes")}));
  }
}

TEST(RecordParser, StaysFailedUntilReset) {
  RecordParser parser;
  size_t used = 0;
  const std::string bad = record(RecordType::kStdin, 1, "");
  Event e = parser.next(bad, &used);
  EXPECT_EQ(e.kind, Event::kError);
  EXPECT_EQ(used, 8u);
  EXPECT_FALSE(parser.at_record_boundary());
  const std::string good = record(RecordType::kStdout, 1, "x");
  e = parser.next(good, &used);
  EXPECT_EQ(e.kind, Event::kError);
  EXPECT_EQ(used, 0u);
  parser.reset();
  EXPECT_EQ(parser.error(), "");
  EXPECT_TRUE(parser.at_record_boundary());
  e = parser.next(good, &used);
  EXPECT_EQ(e.kind, Event::kStdout);
  EXPECT_EQ(e.data, "x");
}

TEST(RecordParser, ResetDropsAPartialRecord) {
  RecordParser parser;
  size_t used = 0;
  const std::string input = record(RecordType::kStdout, 1, "abc");
  EXPECT_EQ(parser.next(std::string_view(input).substr(0, 3), &used).kind, Event::kNeedMore);
  parser.reset();
  Event e = parser.next(input, &used);
  EXPECT_EQ(e.kind, Event::kStdout);
  EXPECT_EQ(e.data, "abc");
  EXPECT_EQ(used, input.size());
}

TEST(RecordParser, NeedsMoreOnEmptyAndPartialInput) {
  EXPECT_TRUE(parses_to("", {}));
  const std::string input = record(RecordType::kStdout, 1, "abcdef", 2);
  for (size_t n = 0; n < 8; ++n) EXPECT_TRUE(parses_to(input.substr(0, n), {})) << n;
  EXPECT_TRUE(parses_to(input.substr(0, 11), {stdout_ev(1, "abc")}));
  EXPECT_TRUE(parses_to(input.substr(0, 15), {stdout_ev(1, "abcdef")}));
}

}  // namespace
}  // namespace tern::fastcgi
