#include "http/chars.h"

#include <gtest/gtest.h>

#include <string>

namespace tern::http::chars {
namespace {

std::string members(bool (*in)(char)) {
  std::string out;
  for (int c = 0; c < 256; ++c) {
    if (in(static_cast<char>(c))) out += static_cast<char>(c);
  }
  return out;
}

TEST(Chars, TcharIsExactlyRfc9110) {
  EXPECT_EQ(members(is_tchar),
            "!#$%&'*+-.0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ^_`abcdefghijklmnopqrstuvwxyz|~");
}

TEST(Chars, VcharAndFieldText) {
  EXPECT_EQ(members(is_vchar).size(), 0x7eu - 0x21u + 1);
  EXPECT_FALSE(is_vchar(' '));
  EXPECT_FALSE(is_vchar('\x7f'));
  // Field text: VCHAR, SP, HTAB and obs-text; no other CTL and no DEL.
  EXPECT_TRUE(is_field_text('\t'));
  EXPECT_TRUE(is_field_text(' '));
  EXPECT_TRUE(is_field_text('\x80'));
  EXPECT_TRUE(is_field_text('\xff'));
  for (char c : {'\0', '\r', '\n', '\x1f', '\x7f'}) EXPECT_FALSE(is_field_text(c)) << int(c);
}

// The word-at-a-time scan agrees with the byte class for every byte at
// every position of a word and of the tail, and next to bytes that carry
// a borrow (0x00, 0x20, 0x7f, 0x80, 0xff).
TEST(Chars, AllFieldTextAgreesWithTheByteClass) {
  for (int c = 0; c < 256; ++c) {
    for (size_t length : {1u, 7u, 8u, 9u, 16u, 21u}) {
      for (size_t at = 0; at < length; ++at) {
        for (char around : {'a', ' ', '\t', '\x7e', '\x80', '\xff', '\x21'}) {
          std::string s(length, around);
          s[at] = static_cast<char>(c);
          EXPECT_EQ(all_field_text(s), is_field_text(static_cast<char>(c)))
              << "byte " << c << " at " << at << " of " << length << " among " << int(around);
        }
      }
    }
  }
  EXPECT_TRUE(all_field_text(""));
  EXPECT_TRUE(all_field_text("text/html; charset=utf-8\tand more"));
  EXPECT_FALSE(all_field_text("text/html; charset=utf-8\r\nX: y"));
}

TEST(Chars, DigitsHexAndTrim) {
  EXPECT_EQ(members(is_digit), "0123456789");
  EXPECT_EQ(hex_value('0'), 0);
  EXPECT_EQ(hex_value('a'), 10);
  EXPECT_EQ(hex_value('F'), 15);
  EXPECT_EQ(hex_value('g'), -1);
  EXPECT_EQ(trim_ows(" \t a b\t "), "a b");
  EXPECT_EQ(trim_ows(" \t "), "");
}

TEST(Chars, RegNameIsUnreservedAndSubDelims) {
  std::string reg;
  for (int c = 0; c < 256; ++c) {
    if (has(static_cast<char>(c), kRegName)) reg += static_cast<char>(c);
  }
  EXPECT_EQ(reg, "!$&'()*+,-.0123456789;=ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~");
}

}  // namespace
}  // namespace tern::http::chars
