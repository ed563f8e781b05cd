// The character classes of HTTP's grammar, in one table: tchar (RFC 9110
// 5.6.2), digits and hex digits, letters, reg-name (RFC 3986 3.2.2), VCHAR,
// the bytes a field value may hold, and OWS. Every parser here (request
// heads, chunked framing, ranges, URIs, CGI response heads) asks these; the
// request scanner reads the table directly in its loops.
//
// Header-only and constexpr; any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace tern::http::chars {

enum Class : uint8_t {
  kTchar = 1,
  kDigit = 2,
  kHex = 4,
  kAlpha = 8,
  kRegName = 16,   // unreserved and sub-delims (no '%', which is an escape)
  kVchar = 32,     // 0x21..0x7e
  kFieldText = 64,  // HTAB, SP, VCHAR, obs-text (0x80..0xff): field values
};

constexpr std::array<uint8_t, 256> make_table() {
  std::array<uint8_t, 256> t{};
  auto add = [&t](std::string_view bytes, uint8_t cls) {
    for (char c : bytes) t[static_cast<unsigned char>(c)] |= cls;
  };
  add("0123456789", kTchar | kRegName | kHex | kDigit);
  add("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", kTchar | kRegName | kAlpha);
  add("abcdefABCDEF", kHex);
  add("!#$%&'*+-.^_`|~", kTchar);
  add("-._~!$&'()*+,;=", kRegName);
  for (int c = 0x21; c <= 0x7e; ++c) t[c] |= kVchar | kFieldText;
  for (int c = 0x80; c <= 0xff; ++c) t[c] |= kFieldText;
  t[' '] |= kFieldText;
  t['\t'] |= kFieldText;
  return t;
}

inline constexpr std::array<uint8_t, 256> kTable = make_table();

constexpr bool has(char c, uint8_t cls) { return (kTable[static_cast<unsigned char>(c)] & cls) != 0; }
constexpr bool is_tchar(char c) { return has(c, kTchar); }
constexpr bool is_digit(char c) { return has(c, kDigit); }
constexpr bool is_alpha(char c) { return has(c, kAlpha); }
constexpr bool is_vchar(char c) { return has(c, kVchar); }
constexpr bool is_field_text(char c) { return has(c, kFieldText); }
constexpr bool is_ows(char c) { return c == ' ' || c == '\t'; }

// The value of a hex digit, or -1.
constexpr int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

constexpr std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace tern::http::chars
