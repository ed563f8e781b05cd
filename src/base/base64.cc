#include "base/base64.h"

#include <array>
#include <cstdint>

namespace tern {
namespace {

constexpr uint8_t kInvalid = 0xff;

constexpr std::array<uint8_t, 256> make_table() {
  std::array<uint8_t, 256> table{};
  table.fill(kInvalid);
  constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < kAlphabet.size(); ++i) table[static_cast<uint8_t>(kAlphabet[i])] = static_cast<uint8_t>(i);
  return table;
}

constexpr std::array<uint8_t, 256> kTable = make_table();

}  // namespace

bool base64_decode(std::string_view text, std::string* out) {
  if (text.size() % 4 == 0 && !text.empty()) {
    // Up to two '=' close a padded text; none may come before them.
    size_t pad = 0;
    while (pad < 2 && text[text.size() - 1 - pad] == '=') ++pad;
    text.remove_suffix(pad);
  }
  const size_t tail = text.size() % 4;
  if (tail == 1) return false;  // six bits: not a byte
  out->resize(text.size() / 4 * 3 + (tail == 0 ? 0 : tail - 1));
  auto* to = reinterpret_cast<uint8_t*>(out->data());
  const auto* from = reinterpret_cast<const uint8_t*>(text.data());
  const uint8_t* whole_end = from + text.size() - tail;
  for (; from != whole_end; from += 4, to += 3) {
    const uint8_t a = kTable[from[0]], b = kTable[from[1]], c = kTable[from[2]], d = kTable[from[3]];
    if (((a | b | c | d) & 0xc0) != 0) return false;  // kInvalid has them
    const uint32_t group = uint32_t{a} << 18 | uint32_t{b} << 12 | uint32_t{c} << 6 | d;
    to[0] = static_cast<uint8_t>(group >> 16);
    to[1] = static_cast<uint8_t>(group >> 8);
    to[2] = static_cast<uint8_t>(group);
  }
  if (tail == 0) return true;
  const uint8_t a = kTable[from[0]], b = kTable[from[1]], c = tail == 3 ? kTable[from[2]] : 0;
  if (((a | b | c) & 0xc0) != 0) return false;
  const uint32_t group = uint32_t{a} << 18 | uint32_t{b} << 12 | uint32_t{c} << 6;
  // The bits beyond the last whole byte must be zero (one encoding a text).
  if (tail == 2 ? (group & 0xffff) != 0 : (group & 0xff) != 0) return false;
  to[0] = static_cast<uint8_t>(group >> 16);
  if (tail == 3) to[1] = static_cast<uint8_t>(group >> 8);
  return true;
}

bool base64url_decode(std::string_view text, std::string* out) {
  std::string standard(text);
  for (char& c : standard) {
    if (c == '+' || c == '/') return false;
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  return base64_decode(standard, out);
}

std::string base64url_encode(std::string_view bytes) {
  constexpr std::string_view kUrlAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  const auto* from = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t left = bytes.size();
  for (; left >= 3; from += 3, left -= 3) {
    const uint32_t group = uint32_t{from[0]} << 16 | uint32_t{from[1]} << 8 | from[2];
    for (int shift = 18; shift >= 0; shift -= 6) out.push_back(kUrlAlphabet[(group >> shift) & 0x3f]);
  }
  if (left > 0) {
    const uint32_t group = uint32_t{from[0]} << 16 | (left == 2 ? uint32_t{from[1]} << 8 : 0);
    out.push_back(kUrlAlphabet[group >> 18]);
    out.push_back(kUrlAlphabet[(group >> 12) & 0x3f]);
    if (left == 2) out.push_back(kUrlAlphabet[(group >> 6) & 0x3f]);
  }
  return out;
}

}  // namespace tern
