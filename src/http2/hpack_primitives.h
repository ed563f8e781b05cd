// HPACK's two primitive types (RFC 7541 section 5): prefixed integers and
// string literals, as the decoder reads them and the encoder writes them,
// and the decoder's error codes. Writers write at a raw pointer the caller
// has made room at (kMaxIntBytes per integer), so that a representation
// goes straight into an output Buffer.
//
// Pure functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "http2/hpack_huffman.h"

namespace tern::http2 {

// Why a header block could not be decoded. Every error but
// kHeaderListTooLarge is a COMPRESSION_ERROR (RFC 9113 section 4.3).
enum class HpackError : uint8_t {
  kOk = 0,
  kTruncated,           // the block ends inside a representation
  kIntegerOverflow,     // past kHpackMaxInt, or too many continuation bytes
  kBadIndex,            // index 0, or past the static and dynamic tables
  kBadHuffman,          // EOS, or bad padding (section 5.2)
  kStringTooLong,       // past the decoder's max_string_length
  kBadSizeUpdate,       // past our limit, after a field, or missing
  kHeaderListTooLarge,  // decoded list past max_header_list_size
};

const char* to_string(HpackError error);

// Integers past this are refused: no length, index or table size we accept
// comes near it, and the check keeps the arithmetic in 32 bits.
// Whether two strings are equal, compared in machine words with no call:
// the names and values the hot path compares (a field name against the
// ones tern writes, a value against a table entry's) are short, and a call
// to memcmp costs more than the compare.
inline bool same_bytes(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  const char* x = a.data();
  const char* y = b.data();
  auto word_at = [](const char* p, size_t at, auto zero) {
    decltype(zero) w;
    std::memcpy(&w, p + at, sizeof w);
    return w;
  };
  if (n >= 8) {
    for (size_t at = 0; at + 8 < n; at += 8) {
      if (word_at(x, at, uint64_t{}) != word_at(y, at, uint64_t{})) return false;
    }
    return word_at(x, n - 8, uint64_t{}) == word_at(y, n - 8, uint64_t{});
  }
  if (n >= 4) {
    return word_at(x, 0, uint32_t{}) == word_at(y, 0, uint32_t{}) &&
           word_at(x, n - 4, uint32_t{}) == word_at(y, n - 4, uint32_t{});
  }
  for (size_t i = 0; i < n; ++i) {
    if (x[i] != y[i]) return false;
  }
  return true;
}

inline constexpr uint32_t kHpackMaxInt = INT32_MAX;
// An integer takes its prefix byte and at most 5 continuation bytes.
inline constexpr size_t kMaxIntBytes = 6;

// Reads an integer whose prefix is the low `prefix_bits` bits of *p
// (section 5.1), advancing p. Leading zero continuation bytes are legal
// but at most 5 continuation bytes are read in all.
inline HpackError hpack_read_int(const uint8_t*& p, const uint8_t* end, unsigned prefix_bits,
                                 uint32_t& value) {
  if (p == end) return HpackError::kTruncated;
  const uint32_t mask = (1u << prefix_bits) - 1;
  uint64_t v = *p++ & mask;
  if (v < mask) {
    value = static_cast<uint32_t>(v);
    return HpackError::kOk;
  }
  for (unsigned shift = 0; shift <= 28; shift += 7) {
    if (p == end) return HpackError::kTruncated;
    const uint8_t b = *p++;
    v += uint64_t{b & 0x7fu} << shift;
    if (v > kHpackMaxInt) return HpackError::kIntegerOverflow;
    if (!(b & 0x80)) {
      value = static_cast<uint32_t>(v);
      return HpackError::kOk;
    }
  }
  return HpackError::kIntegerOverflow;
}

// Writes `value` with an N-bit prefix; `flags` are the first byte's bits
// above the prefix. Returns the end of what it wrote.
inline char* hpack_write_int(char* p, uint8_t flags, unsigned prefix_bits, uint32_t value) {
  const uint32_t mask = (1u << prefix_bits) - 1;
  if (value < mask) {
    *p++ = static_cast<char>(flags | value);
    return p;
  }
  *p++ = static_cast<char>(flags | mask);
  value -= mask;
  while (value >= 0x80) {
    *p++ = static_cast<char>(0x80 | (value & 0x7f));
    value >>= 7;
  }
  *p++ = static_cast<char>(value);
  return p;
}

// Room a string literal needs at most: length integer plus the bytes.
inline size_t hpack_string_room(std::string_view s) { return kMaxIntBytes + s.size(); }

// Writes a string literal (section 5.2), Huffman-coded when `huffman`, in
// which case huffman_size is huffman::encoded_size(s) (the caller has it
// already, from choosing).
inline char* hpack_write_string(char* p, std::string_view s, bool huffman, size_t huffman_size) {
  if (!huffman) {
    p = hpack_write_int(p, 0, 7, static_cast<uint32_t>(s.size()));
    if (!s.empty()) std::memcpy(p, s.data(), s.size());
    return p + s.size();
  }
  p = hpack_write_int(p, 0x80, 7, static_cast<uint32_t>(huffman_size));
  return huffman::encode(s, p);
}

}  // namespace tern::http2
