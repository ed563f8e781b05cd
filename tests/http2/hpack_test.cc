// HPACK against RFC 7541 Appendix C, both ways: decoding the RFC's bytes
// gives the RFC's fields and tables, and encoding the RFC's fields with the
// representations the RFC used gives the RFC's bytes. The encoder's own
// choices reproduce C.3 to C.5 as well.
#include "http2/hpack_decoder.h"

#include <gtest/gtest.h>

#include <functional>
#include <tuple>

#include "http2/hpack_encoder.h"
#include "http2/hpack_primitives.h"
#include "hpack_test_support.h"

namespace tern::http2 {
namespace {

using testing::decode;
using testing::entries;
using testing::Pairs;
using testing::tohex;
using testing::unhex;
using Indexing = HpackEncoder::Indexing;

// C.1: integers.
TEST(HpackRfc, IntegersC1) {
  struct Case {
    unsigned prefix;
    uint32_t value;
    const char* hex;
  };
  for (const Case& c : {Case{5, 10, "0a"}, Case{5, 1337, "1f9a0a"}, Case{8, 42, "2a"}}) {
    char buf[kMaxIntBytes];
    const char* end = hpack_write_int(buf, 0, c.prefix, c.value);
    EXPECT_EQ(tohex({buf, static_cast<size_t>(end - buf)}), c.hex);
    const std::string bytes = unhex(c.hex);
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
    uint32_t value = 0;
    ASSERT_EQ(hpack_read_int(p, p + bytes.size(), c.prefix, value), HpackError::kOk);
    EXPECT_EQ(value, c.value);
    EXPECT_EQ(p, reinterpret_cast<const uint8_t*>(bytes.data()) + bytes.size());
  }
}

// One header block of a sequence: its bytes, its fields, the table after
// it, and the RFC's representations written through the low-level calls.
struct Step {
  const char* hex;
  Pairs fields;
  Pairs table;
  uint32_t table_size;
  std::function<void(HpackEncoder&, net::Buffer&, bool huffman)> represent;
};

void check_decoding(uint32_t table_size, const std::vector<Step>& steps) {
  HpackDecoder decoder({.table_size_limit = table_size});
  for (const Step& step : steps) {
    SCOPED_TRACE(step.hex);
    const auto d = decode(decoder, unhex(step.hex));
    ASSERT_EQ(d.error, HpackError::kOk);
    EXPECT_EQ(d.fields, step.fields);
    EXPECT_EQ(entries(decoder.table()), step.table);
    EXPECT_EQ(decoder.table().size(), step.table_size);
  }
}

// The encoder announces a table smaller than the 4096 both ends start
// with; the RFC's examples leave that update out.
std::string size_update_for(uint32_t table_size) {
  if (table_size == kHpackDefaultTableSize) return "";
  char buf[kMaxIntBytes];
  return {buf, hpack_write_int(buf, 0x20, 5, table_size)};
}

void check_representations(uint32_t table_size, const std::vector<Step>& steps, bool huffman) {
  HpackEncoder encoder({.max_table_size = table_size});
  std::string lead = size_update_for(table_size);
  for (const Step& step : steps) {
    SCOPED_TRACE(step.hex);
    net::Buffer out;
    step.represent(encoder, out, huffman);
    EXPECT_EQ(tohex(out.view()), tohex(lead + unhex(step.hex)));
    EXPECT_EQ(entries(encoder.table()), step.table);
    EXPECT_EQ(encoder.table().size(), step.table_size);
    lead.clear();
  }
}

void check_policy(uint32_t table_size, const std::vector<Step>& steps, bool huffman) {
  HpackEncoder encoder({.max_table_size = table_size, .huffman = huffman});
  std::string lead = size_update_for(table_size);
  for (const Step& step : steps) {
    SCOPED_TRACE(step.hex);
    net::Buffer out;
    for (const auto& [name, value] : step.fields) encoder.encode(name, value, out);
    EXPECT_EQ(tohex(out.view()), tohex(lead + unhex(step.hex)));
    lead.clear();
  }
}

// C.2: one representation of each kind, each on an empty table.
TEST(HpackRfc, FieldRepresentationsC2) {
  struct Case {
    const char* hex;
    const char* name;
    const char* value;
    uint32_t name_index;
    Indexing indexing;
    uint32_t table_size;
  };
  const Case cases[] = {
      {"400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572", "custom-key", "custom-header", 0,
       Indexing::kIncremental, 55},
      {"040c 2f73 616d 706c 652f 7061 7468", ":path", "/sample/path", 4, Indexing::kNone, 0},
      {"1008 7061 7373 776f 7264 0673 6563 7265 74", "password", "secret", 0, Indexing::kNever, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.hex);
    HpackDecoder decoder;
    const auto d = decode(decoder, unhex(c.hex));
    ASSERT_EQ(d.error, HpackError::kOk);
    EXPECT_EQ(d.fields, (Pairs{{c.name, c.value}}));
    EXPECT_EQ(d.raw[0].never_indexed, c.indexing == Indexing::kNever);
    EXPECT_EQ(decoder.table().size(), c.table_size);
    HpackEncoder encoder;
    net::Buffer out;
    encoder.encode_literal(c.name, c.value, c.name_index, c.indexing, false, out);
    EXPECT_EQ(tohex(out.view()), tohex(unhex(c.hex)));
    EXPECT_EQ(encoder.table().size(), c.table_size);
  }
  HpackDecoder decoder;
  const auto d = decode(decoder, unhex("82"));
  EXPECT_EQ(d.fields, (Pairs{{":method", "GET"}}));
  EXPECT_EQ(d.raw[0].static_index, 2);
  HpackEncoder encoder;
  net::Buffer out;
  encoder.encode_indexed(2, out);
  EXPECT_EQ(tohex(out.view()), "82");
}

// C.3 and C.4: three requests on one connection.
std::vector<Step> requests(const char* hex1, const char* hex2, const char* hex3) {
  const Pairs r1 = {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "www.example.com"}};
  Pairs r2 = r1;
  r2.emplace_back("cache-control", "no-cache");
  const Pairs r3 = {{":method", "GET"},
                    {":scheme", "https"},
                    {":path", "/index.html"},
                    {":authority", "www.example.com"},
                    {"custom-key", "custom-value"}};
  const Pairs t1 = {{":authority", "www.example.com"}};
  const Pairs t2 = {{"cache-control", "no-cache"}, {":authority", "www.example.com"}};
  const Pairs t3 = {{"custom-key", "custom-value"}, {"cache-control", "no-cache"}, {":authority", "www.example.com"}};
  return {
      {hex1, r1, t1, 57,
       [](HpackEncoder& e, net::Buffer& out, bool h) {
         for (uint32_t i : {2, 6, 4}) e.encode_indexed(i, out);
         e.encode_literal(":authority", "www.example.com", 1, Indexing::kIncremental, h, out);
       }},
      {hex2, r2, t2, 110,
       [](HpackEncoder& e, net::Buffer& out, bool h) {
         for (uint32_t i : {2, 6, 4, 62}) e.encode_indexed(i, out);
         e.encode_literal("cache-control", "no-cache", 24, Indexing::kIncremental, h, out);
       }},
      {hex3, r3, t3, 164,
       [](HpackEncoder& e, net::Buffer& out, bool h) {
         for (uint32_t i : {2, 7, 5, 63}) e.encode_indexed(i, out);
         e.encode_literal("custom-key", "custom-value", 0, Indexing::kIncremental, h, out);
       }},
  };
}

const std::vector<Step> kRequestsRaw = requests(  // C.3
    "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d", "8286 84be 5808 6e6f 2d63 6163 6865",
    "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65");
const std::vector<Step> kRequestsHuffman = requests(  // C.4
    "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff", "8286 84be 5886 a8eb 1064 9cbf",
    "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf");

TEST(HpackRfc, RequestsWithoutHuffmanC3) {
  check_decoding(4096, kRequestsRaw);
  check_representations(4096, kRequestsRaw, false);
  check_policy(4096, kRequestsRaw, false);
}

TEST(HpackRfc, RequestsWithHuffmanC4) {
  check_decoding(4096, kRequestsHuffman);
  check_representations(4096, kRequestsHuffman, true);
  check_policy(4096, kRequestsHuffman, true);
}

// C.5 and C.6: three responses with a 256-byte table, so entries are
// evicted.
std::vector<Step> responses(const char* hex1, const char* hex2, const char* hex3) {
  const std::string date1 = "Mon, 21 Oct 2013 20:13:21 GMT";
  const std::string date2 = "Mon, 21 Oct 2013 20:13:22 GMT";
  const std::string location = "https://www.example.com";
  const std::string cookie = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
  const Pairs r1 = {{":status", "302"}, {"cache-control", "private"}, {"date", date1}, {"location", location}};
  const Pairs r2 = {{":status", "307"}, {"cache-control", "private"}, {"date", date1}, {"location", location}};
  const Pairs r3 = {{":status", "200"},          {"cache-control", "private"}, {"date", date2},
                    {"location", location},      {"content-encoding", "gzip"}, {"set-cookie", cookie}};
  const Pairs t1 = {{"location", location}, {"date", date1}, {"cache-control", "private"}, {":status", "302"}};
  const Pairs t2 = {{":status", "307"}, {"location", location}, {"date", date1}, {"cache-control", "private"}};
  const Pairs t3 = {{"set-cookie", cookie}, {"content-encoding", "gzip"}, {"date", date2}};
  return {
      {hex1, r1, t1, 222,
       [=](HpackEncoder& e, net::Buffer& out, bool h) {
         e.encode_literal(":status", "302", 8, Indexing::kIncremental, h, out);
         e.encode_literal("cache-control", "private", 24, Indexing::kIncremental, h, out);
         e.encode_literal("date", date1, 33, Indexing::kIncremental, h, out);
         e.encode_literal("location", location, 46, Indexing::kIncremental, h, out);
       }},
      {hex2, r2, t2, 222,
       [](HpackEncoder& e, net::Buffer& out, bool h) {
         e.encode_literal(":status", "307", 8, Indexing::kIncremental, h, out);
         for (uint32_t i : {65, 64, 63}) e.encode_indexed(i, out);
       }},
      {hex3, r3, t3, 215,
       [=](HpackEncoder& e, net::Buffer& out, bool h) {
         for (uint32_t i : {8, 65}) e.encode_indexed(i, out);
         e.encode_literal("date", date2, 33, Indexing::kIncremental, h, out);
         e.encode_indexed(64, out);
         e.encode_literal("content-encoding", "gzip", 26, Indexing::kIncremental, h, out);
         e.encode_literal("set-cookie", cookie, 55, Indexing::kIncremental, h, out);
       }},
  };
}

const std::vector<Step> kResponsesRaw = responses(  // C.5
    "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133"
    "2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70"
    "6c65 2e63 6f6d",
    "4803 3330 37c1 c0bf",
    "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d"
    "54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049"
    "5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e"
    "3d31");
const std::vector<Step> kResponsesHuffman = responses(  // C.6
    "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6"
    "2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
    "4883 640e ffc1 c0bf",
    "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab"
    "77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f"
    "9587 3160 65c0 03ed 4ee5 b106 3d50 07");

TEST(HpackRfc, ResponsesWithoutHuffmanC5) {
  check_decoding(256, kResponsesRaw);
  check_representations(256, kResponsesRaw, false);
  check_policy(256, kResponsesRaw, false);
}

// The encoder's own choices differ from C.6 in one place: "307" is three
// bytes either way, and a tie stays a plain string.
TEST(HpackRfc, ResponsesWithHuffmanC6) {
  check_decoding(256, kResponsesHuffman);
  check_representations(256, kResponsesHuffman, true);
}

TEST(HpackDecoder, ReportsStaticNamesThroughDynamicEntries) {
  HpackDecoder decoder;
  auto d = decode(decoder, unhex(kRequestsRaw[0].hex));
  ASSERT_EQ(d.error, HpackError::kOk);
  EXPECT_EQ(d.raw[0].static_index, 2);  // :method GET
  EXPECT_EQ(d.raw[3].static_index, 1);  // :authority, a literal with name index 1
  d = decode(decoder, unhex("be"));     // the dynamic entry it made
  EXPECT_EQ(d.fields, (Pairs{{":authority", "www.example.com"}}));
  EXPECT_EQ(d.raw[0].static_index, 1);
  d = decode(decoder, unhex("4003 6162 6301 78 be"));  // a literal name, then the same name
  EXPECT_EQ(d.raw[0].static_index, 0);
  EXPECT_EQ(d.raw[1].static_index, 0);
}

// Whether a value holds only field text is found once, off the wire, and
// an index to the entry it made says the same.
TEST(HpackDecoder, RemembersWhetherAValueIsFieldText) {
  HpackDecoder decoder;
  auto d = decode(decoder, unhex("4001 78 03 610d62"));  // x: a CR b, indexed
  ASSERT_EQ(d.error, HpackError::kOk);
  EXPECT_FALSE(d.raw[0].field_text);
  d = decode(decoder, unhex("4001 79 03 610962 bf be 82"));  // y: a HTAB b; x again; y again; :method GET
  ASSERT_EQ(d.error, HpackError::kOk);
  ASSERT_EQ(d.raw.size(), 4u);
  EXPECT_TRUE(d.raw[0].field_text);
  EXPECT_FALSE(d.raw[1].field_text);
  EXPECT_TRUE(d.raw[2].field_text);
  EXPECT_TRUE(d.raw[3].field_text);
  d = decode(decoder, unhex("0001 7a 01 7f"));  // z: DEL, not indexed
  EXPECT_FALSE(d.raw[0].field_text);
}

// The encoder's policy, field by field.
std::string encode_one(HpackEncoder& encoder, std::string_view name, std::string_view value) {
  net::Buffer out;
  encoder.encode(name, value, out);
  return std::string(out.view());
}

TEST(HpackEncoder, NeverIndexesSensitiveFields) {
  HpackEncoder encoder;
  HpackDecoder decoder;
  const std::string long_cookie(40, 'c');
  for (auto [name, value, first] : {std::tuple{"authorization", "Basic dTpw", "1f08"},  // 0x10, name 23
                                    std::tuple{"proxy-authorization", "Basic dTpw", "1f22"},
                                    std::tuple{"cookie", "sid=1", "1f11"}, std::tuple{"set-cookie", "sid=1", "1f28"}}) {
    SCOPED_TRACE(name);
    const std::string block = encode_one(encoder, name, value);
    EXPECT_EQ(tohex(block).substr(0, 4), first);
    const auto d = decode(decoder, block);
    EXPECT_EQ(d.fields, (Pairs{{name, value}}));
    EXPECT_TRUE(d.raw[0].never_indexed);
  }
  EXPECT_EQ(encoder.table().count(), 0u);
  EXPECT_EQ(tohex(encode_one(encoder, "cookie", long_cookie)).substr(0, 2), "60");  // indexed, name 32
  EXPECT_EQ(encoder.table().count(), 1u);
}

TEST(HpackEncoder, IndexesRepeatedFieldsOnly) {
  HpackEncoder encoder;
  EXPECT_EQ(tohex(encode_one(encoder, "x-a", "1")), "4003782d610131");
  EXPECT_EQ(tohex(encode_one(encoder, "x-a", "1")), "be");
  EXPECT_EQ(tohex(encode_one(encoder, "x-a", "2")), "7e0132");  // name 62, indexed
  EXPECT_EQ(tohex(encode_one(encoder, "content-length", "12")), "0f0d023132");
  const std::string big(3000, 'b');  // more than half the table: not indexed
  EXPECT_EQ(tohex(encode_one(encoder, "x-a", big)).substr(0, 4), "0f2f");  // name 62
  EXPECT_EQ(entries(encoder.table()), (Pairs{{"x-a", "2"}, {"x-a", "1"}}));
}

// A name the caller knows to be the static table's: the value it had the
// last time is an index while its entry lasts, and a literal again once
// the entry was evicted (never an index to whatever took its place).
TEST(HpackEncoder, AKnownNameFindsItsLastValueUntilItIsEvicted) {
  HpackEncoder encoder(HpackEncoder::Settings{.max_table_size = 4096, .huffman = false});
  HpackDecoder decoder;
  const uint8_t server = hpack_static_name("server");
  ASSERT_EQ(server, 54);
  const auto encode_known = [&](std::string_view name, std::string_view value, uint8_t known) {
    net::Buffer out;
    encoder.encode(name, value, known, out);
    std::vector<std::pair<std::string, std::string>> fields;
    EXPECT_EQ(decoder.decode(out.view(), [&](const HpackField& f) { fields.emplace_back(f.name, f.value); }),
              HpackError::kOk);
    EXPECT_EQ(fields, (std::vector<std::pair<std::string, std::string>>{{std::string(name), std::string(value)}}));
    return tohex(out.view());
  };
  EXPECT_EQ(encode_known("server", "tern", server), "7604" + tohex("tern"));  // literal, name 54, indexed
  EXPECT_EQ(encode_known("server", "tern", server), "be");                     // dynamic 62
  EXPECT_EQ(encode_known("server", "other", server).substr(0, 2), "76");      // another value: a new entry
  EXPECT_EQ(encode_known("server", "other", server), "be");
  EXPECT_EQ(encode_known("server", "tern", server), "bf");                     // found by the search: 63
  EXPECT_EQ(encode_known("server", "tern", server), "bf");
  // Entries enough to push both out of 4,096 bytes.
  for (int i = 0; i < 40; ++i) encode_known("x-filler", std::to_string(i) + std::string(100, 'f'), 0);
  EXPECT_EQ(encode_known("server", "tern", server), "7604" + tohex("tern"));
  EXPECT_EQ(encode_known("server", "tern", server), "be");
}

TEST(HpackEncoder, ContentLengthIsAPlainLiteralThatLeavesTheTableBe) {
  HpackEncoder encoder;
  HpackDecoder decoder;
  net::Buffer out;
  encoder.encode_content_length(1024, out);
  EXPECT_EQ(tohex(std::string(out.view())), "0f0d0431303234");  // not indexed, name 28, 4 raw digits
  for (const uint64_t length : {uint64_t{0}, uint64_t{7}, UINT64_MAX}) {
    net::Buffer one;
    encoder.encode_content_length(length, one);
    const auto d = decode(decoder, one.view());
    ASSERT_EQ(d.error, HpackError::kOk);
    EXPECT_EQ(d.fields, (Pairs{{"content-length", std::to_string(length)}}));
  }
  EXPECT_EQ(encoder.table().count(), 0u);
  EXPECT_EQ(decoder.table().count(), 0u);
}

TEST(HpackEncoder, HuffmanOnlyWhenShorter) {
  HpackEncoder encoder;
  // Neither "x-b" (19 bits) nor "\xff\xfe" (53 bits) gets shorter.
  EXPECT_EQ(tohex(encode_one(encoder, "x-b", "\xff\xfe")), "4003782d6202fffe");
  EXPECT_EQ(tohex(encode_one(encoder, "x-b", "aaaa")), "7e8318c63f");  // 4 bytes, 3 coded
}

// Section 4.2: a change of the peer's limit is announced at the start of
// the next block, the smallest size first when the table had to shrink.
TEST(HpackEncoder, AnnouncesTableSizeChanges) {
  HpackEncoder encoder;
  HpackDecoder decoder;
  encoder.set_peer_table_size(8192);  // above our own 4096: nothing to say
  EXPECT_EQ(tohex(encode_one(encoder, ":method", "GET")), "82");
  encoder.set_peer_table_size(1000);
  encoder.set_peer_table_size(4096);
  decoder.set_table_size_limit(1000);
  decoder.set_table_size_limit(4096);
  const std::string block = encode_one(encoder, ":method", "GET");
  EXPECT_EQ(tohex(block), "3fc9073fe11f82");
  EXPECT_EQ(decode(decoder, block).error, HpackError::kOk);
  encoder.set_peer_table_size(2000);
  EXPECT_EQ(tohex(encode_one(encoder, ":method", "GET")), "3fb10f82");
  EXPECT_EQ(tohex(encode_one(encoder, ":method", "GET")), "82");
  encoder.set_peer_table_size(0);
  EXPECT_EQ(tohex(encode_one(encoder, "x-a", "1")), "20" "0003782d610131");  // and no more indexing
  EXPECT_EQ(encoder.table().count(), 0u);

  HpackEncoder small({.max_table_size = 0});
  EXPECT_EQ(tohex(encode_one(small, ":method", "GET")), "2082");
}

}  // namespace
}  // namespace tern::http2
