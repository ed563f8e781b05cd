// HpackDecoder on hostile input: every malformed block is refused with its
// compression error, the header list limit stops decoding at the field
// that passes it, and a failed decoder stays failed.
#include "http2/hpack_decoder.h"

#include <gtest/gtest.h>

#include <string>

#include "http2/hpack_encoder.h"
#include "hpack_test_support.h"

namespace tern::http2 {
namespace {

using testing::decode;
using testing::entries;
using testing::Pairs;
using testing::unhex;

HpackError decode_hex(std::string_view hex, HpackDecoder::Settings settings = {}) {
  HpackDecoder decoder(settings);
  return decode(decoder, unhex(hex)).error;
}

TEST(HpackDecoder, RefusesIndexZero) {
  EXPECT_EQ(decode_hex("80"), HpackError::kBadIndex);
  EXPECT_EQ(decode_hex("4001 6101 62 40"), HpackError::kTruncated);  // name index 0 is a literal name
}

TEST(HpackDecoder, RefusesIndexPastTheTables) {
  EXPECT_EQ(decode_hex("bd"), HpackError::kOk);  // 61, the last static entry
  EXPECT_EQ(decode_hex("be"), HpackError::kBadIndex);
  EXPECT_EQ(decode_hex("7e 0161"), HpackError::kBadIndex);  // a name index past the tables
  EXPECT_EQ(decode_hex("4001 6101 62 bf"), HpackError::kBadIndex);  // one dynamic entry: 63 is past it
  EXPECT_EQ(decode_hex("ff ffffff07"), HpackError::kBadIndex);      // a large index that fits
}

TEST(HpackDecoder, RefusesIntegerOverflow) {
  EXPECT_EQ(decode_hex("7f ffffffffffffffffffff"), HpackError::kIntegerOverflow);
  EXPECT_EQ(decode_hex("ff 8080808080 00"), HpackError::kIntegerOverflow);  // six continuation bytes
  EXPECT_EQ(decode_hex("ff 81808080 08"), HpackError::kIntegerOverflow);    // 2^31 + 128
}

TEST(HpackDecoder, RefusesTruncatedInteger) {
  EXPECT_EQ(decode_hex("ff"), HpackError::kTruncated);
  EXPECT_EQ(decode_hex("ff 80"), HpackError::kTruncated);
  EXPECT_EQ(decode_hex("40 7f"), HpackError::kTruncated);  // a name length that does not end
}

TEST(HpackDecoder, RefusesTruncatedString) {
  EXPECT_EQ(decode_hex("40"), HpackError::kTruncated);          // no name
  EXPECT_EQ(decode_hex("40 0361 62"), HpackError::kTruncated);  // name one byte short
  EXPECT_EQ(decode_hex("40 0161"), HpackError::kTruncated);     // no value
  EXPECT_EQ(decode_hex("04 0561 6263"), HpackError::kTruncated);
}

TEST(HpackDecoder, RefusesStringLengthPastTheBlockOrTheLimit) {
  EXPECT_EQ(decode_hex("40 7f e906 6161"), HpackError::kTruncated);  // 1000 bytes announced
  EXPECT_EQ(decode_hex("40 0a 61616161616161616161 00", {.max_string_length = 10}), HpackError::kOk);
  EXPECT_EQ(decode_hex("40 0b 6161616161616161616161 00", {.max_string_length = 10}), HpackError::kStringTooLong);
  // Huffman: 8 bytes on the wire, twelve '0's (5 bits each) decoded.
  EXPECT_EQ(decode_hex("00 0161 88 00000000000000 0f", {.max_string_length = 10}), HpackError::kStringTooLong);
}

TEST(HpackDecoder, RefusesBadHuffman) {
  EXPECT_EQ(decode_hex("00 0161 81 1f"), HpackError::kOk);              // "a" and 3 bits of padding
  EXPECT_EQ(decode_hex("00 0161 81 1e"), HpackError::kBadHuffman);      // padding with a zero
  EXPECT_EQ(decode_hex("00 0161 82 1fff"), HpackError::kBadHuffman);    // 11 bits of padding
  EXPECT_EQ(decode_hex("00 0161 84 ffffffff"), HpackError::kBadHuffman);  // EOS
  EXPECT_EQ(decode_hex("00 81ff 0161"), HpackError::kBadHuffman);       // in a name too
}

TEST(HpackDecoder, RefusesSizeUpdatePastTheLimit) {
  EXPECT_EQ(decode_hex("3fe11f 82"), HpackError::kOk);  // 4096
  EXPECT_EQ(decode_hex("3fe21f 82"), HpackError::kBadSizeUpdate);
  EXPECT_EQ(decode_hex("3fe101 82", {.table_size_limit = 256}), HpackError::kOk);
  EXPECT_EQ(decode_hex("3fe201 82", {.table_size_limit = 256}), HpackError::kBadSizeUpdate);
}

TEST(HpackDecoder, RefusesSizeUpdateAfterAField) {
  EXPECT_EQ(decode_hex("20 3fe11f 82"), HpackError::kOk);  // two at the start are fine
  EXPECT_EQ(decode_hex("82 20"), HpackError::kBadSizeUpdate);
  EXPECT_EQ(decode_hex("20 82 3f e11f"), HpackError::kBadSizeUpdate);
}

TEST(HpackDecoder, SizeUpdateEvicts) {
  HpackDecoder decoder;
  ASSERT_EQ(decode(decoder, unhex("4001 6101 62 4001 6301 64")).error, HpackError::kOk);
  EXPECT_EQ(decoder.table().size(), 68u);
  ASSERT_EQ(decode(decoder, unhex("3f 15")).error, HpackError::kOk);  // 52: room for one
  EXPECT_EQ(entries(decoder.table()), (Pairs{{"c", "d"}}));
  ASSERT_EQ(decode(decoder, unhex("20")).error, HpackError::kOk);
  EXPECT_EQ(decoder.table().count(), 0u);
}

// After we advertise a smaller table (and the peer acknowledged), the
// peer's next block must start with a size update no larger.
TEST(HpackDecoder, LowerLimitRequiresSizeUpdate) {
  const std::string insert = unhex("4001 6101 62");
  HpackDecoder decoder;
  ASSERT_EQ(decode(decoder, insert).error, HpackError::kOk);
  decoder.set_table_size_limit(100);
  EXPECT_EQ(decode(decoder, "").error, HpackError::kOk);  // nothing to check yet
  EXPECT_EQ(decode(decoder, unhex("3f 46 82")).error, HpackError::kBadSizeUpdate);  // 101

  HpackDecoder ok;
  ASSERT_EQ(decode(ok, insert).error, HpackError::kOk);
  ok.set_table_size_limit(100);
  ASSERT_EQ(decode(ok, unhex("3f 45 be")).error, HpackError::kOk);  // 100, then the entry
  EXPECT_EQ(ok.table().max_size(), 100u);

  HpackDecoder missing;
  ASSERT_EQ(decode(missing, insert).error, HpackError::kOk);
  missing.set_table_size_limit(100);
  EXPECT_EQ(decode(missing, unhex("be")).error, HpackError::kBadSizeUpdate);

  HpackDecoder raised;  // a larger limit asks nothing of the peer
  raised.set_table_size_limit(8192);
  EXPECT_EQ(decode(raised, unhex("82")).error, HpackError::kOk);
  EXPECT_EQ(decode(raised, unhex("3fe13f 82")).error, HpackError::kOk);  // 8192
  EXPECT_EQ(raised.table().max_size(), 8192u);
}

// An HPACK bomb: one 1000-byte entry named 10,000 times. Decoding stops at
// the field that passes the limit, having done the work of the limit only.
TEST(HpackDecoder, HeaderListLimitStopsEarly) {
  std::string block = unhex("4001 78 7f e906") + std::string(1000, 'v');  // x: 1000 v's
  block.append(10000, static_cast<char>(0xbe));
  HpackDecoder decoder({.max_header_list_size = 16384});
  int calls = 0;
  EXPECT_EQ(decoder.decode(block, [&](const HpackField&) { ++calls; }), HpackError::kHeaderListTooLarge);
  EXPECT_EQ(calls, 16384 / (1 + 1000 + 32));
  // The same list under a limit it fits in.
  HpackDecoder roomy({.max_header_list_size = 11 * 1033, .max_string_length = 1000});
  calls = 0;
  block.resize(block.size() - 10000 + 10);
  EXPECT_EQ(roomy.decode(block, [&](const HpackField&) { ++calls; }), HpackError::kOk);
  EXPECT_EQ(calls, 11);
}

TEST(HpackDecoder, StaysFailedAfterAnError) {
  HpackDecoder decoder;
  EXPECT_EQ(decode(decoder, unhex("80")).error, HpackError::kBadIndex);
  EXPECT_EQ(decode(decoder, unhex("82")).error, HpackError::kBadIndex);
  EXPECT_EQ(decoder.error(), HpackError::kBadIndex);
}

// Section 4.4: a literal may name the entry its own insertion evicts.
TEST(HpackDecoder, NameOfAnEntryEvictedByItsOwnInsertion) {
  HpackDecoder decoder({.table_size_limit = 100});
  const std::string name(30, 'n');
  std::string block = unhex("40 1e") + name + unhex("1e") + std::string(30, 'v');
  ASSERT_EQ(decode(decoder, block).error, HpackError::kOk);
  block = unhex("7e 1e") + std::string(30, 'w');  // name index 62, value "www..."
  const auto d = decode(decoder, block);
  ASSERT_EQ(d.error, HpackError::kOk);
  EXPECT_EQ(d.fields, (Pairs{{name, std::string(30, 'w')}}));
  EXPECT_EQ(entries(decoder.table()), (Pairs{{name, std::string(30, 'w')}}));

  HpackEncoder encoder({.max_table_size = 100});  // the same from the encoder's side
  net::Buffer out;
  encoder.encode_literal(name, std::string(30, 'v'), 0, HpackEncoder::Indexing::kIncremental, false, out);
  encoder.encode_literal(name, std::string(30, 'w'), 62, HpackEncoder::Indexing::kIncremental, false, out);
  EXPECT_EQ(entries(encoder.table()), (Pairs{{name, std::string(30, 'w')}}));
  HpackDecoder peer;
  const auto e = decode(peer, out.view());
  ASSERT_EQ(e.error, HpackError::kOk);
  EXPECT_EQ(entries(peer.table()), entries(encoder.table()));
}

}  // namespace
}  // namespace tern::http2
