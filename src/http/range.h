// Range request parsing (RFC 9110 section 14) for byte ranges of a
// representation whose size is known.
//
// We serve a single range as 206 and nothing fancier: a request for several
// ranges is answered 200 with the whole representation (RFC 9110 14.2 lets a
// server ignore Range), because multipart/byteranges costs a boundary
// generator and a second body framing for a feature that download managers,
// media players and resumed transfers do not need; they all ask for one
// range. nginx does send multipart here; this is a deliberate difference.
//
// Free functions without state. Any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace tern::http {

// What a Range field asks of a representation, as answered.
enum class RangeKind : uint8_t {
  kNone,           // no usable Range: absent, another unit, or invalid syntax -> 200
  kSingle,         // exactly one satisfiable range -> 206
  kUnsatisfiable,  // a valid header, but no range overlaps the content -> 416
  kMultiple,       // two or more satisfiable ranges -> 200 (see above)
};

// A Range field judged against a length.
struct RangeResult {
  RangeKind kind = RangeKind::kNone;  // which answer it gets
  uint64_t offset = 0;  // kSingle only
  uint64_t length = 0;  // kSingle only; never 0
};

// Parses the value of a Range header field (empty if absent) for a
// representation of `size` bytes.
//
// Syntax: "bytes" (any case) "=" then a comma-separated list of
// "first-last", "first-" or "-suffix", with optional whitespace around list
// elements and empty elements ignored (RFC 9110 5.6.1). Anything that does not
// fit, including first > last, makes the whole header invalid -> kNone.
// Numbers too large for 64 bits saturate, which yields the obvious meaning
// (unsatisfiable first byte, last byte past the end, suffix of everything).
//
// Satisfiable: "first-..." when first < size; "-n" when n > 0. The last byte
// is clamped to size - 1 and a suffix to the whole representation. Ranges
// that are not satisfiable are dropped when others are; only if none is left
// is the answer kUnsatisfiable. An empty representation has no byte ranges at
// all (Content-Range cannot express an empty one), so for size 0 a non-zero
// suffix, the one form RFC 9110 calls satisfiable there, gives kNone (a 200
// with the empty body) and everything else gives kUnsatisfiable.
RangeResult parse_range(std::string_view header, uint64_t size);

// Longest Content-Range value: "bytes " + 3 * 20 digits + "-" + "/".
inline constexpr size_t kContentRangeMaxSize = 6 + 20 + 1 + 20 + 1 + 20;

// "bytes 0-499/1234" for a 206 carrying [offset, offset + length).
// Requires length > 0. Returns a view of `out`.
std::string_view format_content_range(uint64_t offset, uint64_t length, uint64_t size,
                                      std::span<char, kContentRangeMaxSize> out);

// "bytes */1234", the Content-Range of a 416. Returns a view of `out`.
std::string_view format_unsatisfied_range(uint64_t size,
                                          std::span<char, kContentRangeMaxSize> out);

}  // namespace tern::http
