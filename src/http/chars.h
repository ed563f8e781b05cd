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
#include <cstring>
#include <string_view>

namespace tern::http::chars {

// The classes, as bits of a byte's entry in kTable.
enum Class : uint8_t {
  kTchar = 1,  // a token's characters
  kDigit = 2,  // 0-9
  kHex = 4,    // 0-9, a-f, A-F
  kAlpha = 8,  // a-z, A-Z
  kRegName = 16,   // unreserved and sub-delims (no '%', which is an escape)
  kVchar = 32,     // 0x21..0x7e
  kFieldText = 64,  // HTAB, SP, VCHAR, obs-text (0x80..0xff): field values
};

// Builds kTable (at compile time).
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

// Each byte's classes.
inline constexpr std::array<uint8_t, 256> kTable = make_table();

// Whether `c` is of the classes `cls` (a Class, or several or-ed), and the
// same for each class by name; OWS is SP or HTAB.
constexpr bool has(char c, uint8_t cls) { return (kTable[static_cast<unsigned char>(c)] & cls) != 0; }
constexpr bool is_tchar(char c) { return has(c, kTchar); }
constexpr bool is_digit(char c) { return has(c, kDigit); }
constexpr bool is_alpha(char c) { return has(c, kAlpha); }
constexpr bool is_vchar(char c) { return has(c, kVchar); }
constexpr bool is_field_text(char c) { return has(c, kFieldText); }
constexpr bool is_ows(char c) { return c == ' ' || c == '\t'; }

// Whether every byte of s may be in a field value. Eight bytes at a time
// (four and four below eight, overlapping where the length is not a
// multiple): words with no control byte (below 0x20, or DEL) are all field
// text; a string with one is looked at byte by byte, as HTAB is allowed.
inline bool all_field_text(std::string_view s) {
  constexpr uint64_t kOnes = 0x0101010101010101;
  constexpr uint64_t kHighs = 0x8080808080808080;
  auto has_control = [](uint64_t w) {
    const uint64_t del = w ^ (kOnes * 0x7f);
    return (((w - kOnes * 0x20) & ~w) | ((del - kOnes) & ~del)) & kHighs;
  };
  auto load = [&s](size_t at, auto word) {
    std::memcpy(&word, s.data() + at, sizeof word);
    return word;
  };
  const size_t n = s.size();
  bool clean = true;
  if (n >= 8) {
    for (size_t at = 0; at + 8 < n && clean; at += 8) clean = !has_control(load(at, uint64_t{}));
    clean = clean && !has_control(load(n - 8, uint64_t{}));
  } else if (n >= 4) {
    clean = !has_control(load(0, uint32_t{}) | uint64_t{load(n - 4, uint32_t{})} << 32);
  } else {
    clean = false;  // three bytes or fewer: the loop below
  }
  if (clean) return true;
  for (char c : s) {
    if (!is_field_text(c)) return false;
  }
  return true;
}

// The value of a hex digit, or -1.
constexpr int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `s` without the OWS at either end.
constexpr std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace tern::http::chars
