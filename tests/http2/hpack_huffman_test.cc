// The HPACK Huffman code: the RFC's coded strings, every byte value and
// random strings round trip, every 1- and 2-byte input that decodes is the
// one encoding of its output, and EOS and bad padding are refused.
#include "http2/hpack_huffman.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "hpack_test_support.h"

namespace tern::http2 {
namespace {

using testing::tohex;
using testing::unhex;

std::string encode(std::string_view s) {
  std::string out(huffman::encoded_size(s), '\0');
  char* end = huffman::encode(s, out.data());
  EXPECT_EQ(end, out.data() + out.size());
  return out;
}

// The decoded string, or "<invalid>".
std::string decode(std::string_view in) {
  std::string out(huffman::max_decoded_size(in.size()), '\0');
  const char* end = huffman::decode(in, out.data());
  if (end == nullptr) return "<invalid>";
  out.resize(static_cast<size_t>(end - out.data()));
  return out;
}

// The strings RFC 7541 C.4 and C.6 code.
TEST(HpackHuffman, CodesTheRfcStrings) {
  const std::pair<const char*, const char*> cases[] = {
      {"www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"},
      {"no-cache", "a8eb 1064 9cbf"},
      {"custom-key", "25a8 49e9 5ba9 7d7f"},
      {"custom-value", "25a8 49e9 5bb8 e8b4 bf"},
      {"302", "6402"},
      {"307", "640e ff"},
      {"private", "aec3 771a 4b"},
      {"Mon, 21 Oct 2013 20:13:21 GMT", "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff"},
      {"https://www.example.com", "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3"},
      {"gzip", "9bd9 ab"},
      {"foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
       "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 "
       "3d50 07"},
  };
  for (const auto& [text, hex] : cases) {
    EXPECT_EQ(tohex(encode(text)), tohex(unhex(hex))) << text;
    EXPECT_EQ(decode(unhex(hex)), text);
  }
}

TEST(HpackHuffman, EveryByteRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, static_cast<char>(b));
    EXPECT_EQ(decode(encode(one)), one) << b;
    all.push_back(static_cast<char>(b));
  }
  EXPECT_EQ(decode(encode(all)), all);
  EXPECT_EQ(decode(""), "");
  EXPECT_EQ(encode(""), "");
}

TEST(HpackHuffman, RandomStringsRoundTrip) {
  std::mt19937 rng(7541);
  for (int i = 0; i < 3000; ++i) {
    std::string s(rng() % 200, '\0');
    const bool text = i % 2 == 0;  // half printable ASCII, half any byte
    for (char& c : s) c = static_cast<char>(text ? 32 + rng() % 95 : rng() % 256);
    ASSERT_EQ(decode(encode(s)), s);
  }
}

// Padding is unique (all ones, under 8 bits), so whatever decodes encodes
// back to the same bytes; checked over every input of one and two bytes.
TEST(HpackHuffman, ValidInputsAreCanonical) {
  int valid = 0;
  for (int i = 0; i < 256 + 65536; ++i) {
    std::string in;
    if (i < 256) {
      in.push_back(static_cast<char>(i));
    } else {
      in = {static_cast<char>((i - 256) >> 8), static_cast<char>(i - 256)};
    }
    const std::string out = decode(in);
    if (out == "<invalid>") continue;
    ++valid;
    ASSERT_EQ(tohex(encode(out)), tohex(in));
  }
  EXPECT_GT(valid, 1000);
}

TEST(HpackHuffman, RefusesEos) {
  EXPECT_EQ(decode(unhex("ffffffff")), "<invalid>");     // EOS, 30 ones, and two
  EXPECT_EQ(decode(unhex("1fffffffff")), "<invalid>");   // "a" then EOS
  EXPECT_EQ(decode(unhex("ffff ffff 1f")), "<invalid>");  // EOS then "a"
}

TEST(HpackHuffman, RefusesLongPadding) {
  EXPECT_EQ(decode(unhex("ff")), "<invalid>");    // 8 bits of padding, no symbol
  EXPECT_EQ(decode(unhex("07ff")), "<invalid>");  // "0" and 11 ones
  EXPECT_EQ(decode(unhex("07")), "0");            // "0" and 3 ones
  EXPECT_EQ(decode(unhex("fe")), "<invalid>");    // 7 ones and a zero: half a code
}

TEST(HpackHuffman, RefusesPaddingWithAZero) {
  EXPECT_EQ(decode(unhex("1f")), "a");  // 00011 111
  EXPECT_EQ(decode(unhex("1e")), "<invalid>");
  EXPECT_EQ(decode(unhex("1d")), "<invalid>");
  EXPECT_EQ(decode(unhex("18")), "<invalid>");
}

TEST(HpackHuffman, EncodedSizeCountsBits) {
  EXPECT_EQ(huffman::encoded_size("a"), 1u);                  // 5 bits
  EXPECT_EQ(huffman::encoded_size("aaaaaaaa"), 5u);           // 40 bits
  EXPECT_EQ(huffman::encoded_size(std::string(1, '\n')), 4u);  // 30 bits
  EXPECT_EQ(huffman::encoded_size(std::string(2, '\n')), 8u);  // 60 bits
}

}  // namespace
}  // namespace tern::http2
