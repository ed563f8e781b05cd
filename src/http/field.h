// FieldId: the field names tern itself reads, known by a number so that a
// lookup compares bytes, not strings, whichever protocol carried the
// request. The HTTP/1 parser names each field of a head with field_id();
// the HTTP/2 decoder knows most from their HPACK static-table entry.
//
// A name is found by its length and first letter (one table load), then
// one case-insensitive compare; the names below are chosen so that no two
// share both (accept-language would share them with accept-encoding, and
// if-match with if-range, so those stay kOther).
//
// Header-only; any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace tern::http {

// The field names HTTP code asks about, known by number once parsed.
enum class FieldId : uint8_t {
  kOther,  // any name not below: compared by its text
  kAccept,
  kAcceptEncoding,
  kAuthorization,
  kCacheControl,
  kConnection,
  kContentLength,
  kContentType,
  kCookie,
  kExpect,
  kForwarded,
  kHost,
  kIfModifiedSince,
  kIfNoneMatch,
  kIfRange,
  kKeepAlive,
  kOrigin,
  kRange,
  kReferer,
  kTe,
  kTransferEncoding,
  kUpgrade,
  kUserAgent,
  kXForwardedFor,
  kXForwardedHost,
  kXForwardedProto,
  kXRealIp,
  kXRequestId,
  kCount,
};

namespace detail {

// Indexed by FieldId, as HTTP/1 writes them.
inline constexpr std::array<std::string_view, static_cast<size_t>(FieldId::kCount)> kFieldNames = {
    "",
    "Accept",
    "Accept-Encoding",
    "Authorization",
    "Cache-Control",
    "Connection",
    "Content-Length",
    "Content-Type",
    "Cookie",
    "Expect",
    "Forwarded",
    "Host",
    "If-Modified-Since",
    "If-None-Match",
    "If-Range",
    "Keep-Alive",
    "Origin",
    "Range",
    "Referer",
    "TE",
    "Transfer-Encoding",
    "Upgrade",
    "User-Agent",
    "X-Forwarded-For",
    "X-Forwarded-Host",
    "X-Forwarded-Proto",
    "X-Real-IP",
    "X-Request-Id",
};

inline constexpr size_t kMaxKnownLength = 32;

// [length][first letter - 'a'] -> the one known name of that shape.
using FieldShapes = std::array<std::array<FieldId, 26>, kMaxKnownLength>;

constexpr FieldShapes make_field_shapes() {
  FieldShapes shapes{};
  for (size_t i = 1; i < kFieldNames.size(); ++i) {
    const std::string_view name = kFieldNames[i];
    FieldId& slot = shapes[name.size()][(name[0] | 0x20) - 'a'];
    if (slot != FieldId::kOther) throw "two known field names share a length and first letter";
    slot = static_cast<FieldId>(i);
  }
  return shapes;
}

inline constexpr FieldShapes kFieldShapes = make_field_shapes();

// Each known name in lower case, and a mask with 0x20 where it has a
// letter: a given byte x matches when (x | mask) == lower, so a letter
// matches in either case and '-' only itself. Padded so that word loads
// never run past them.
struct FoldedName {
  std::array<char, kMaxKnownLength> lower{};
  std::array<char, kMaxKnownLength> mask{};
};

constexpr std::array<FoldedName, kFieldNames.size()> make_folded_names() {
  std::array<FoldedName, kFieldNames.size()> folded{};
  for (size_t i = 1; i < kFieldNames.size(); ++i) {
    const std::string_view name = kFieldNames[i];
    for (size_t j = 0; j < name.size(); ++j) {
      const bool letter = (name[j] >= 'a' && name[j] <= 'z') || (name[j] >= 'A' && name[j] <= 'Z');
      folded[i].lower[j] = letter ? static_cast<char>(name[j] | 0x20) : name[j];
      folded[i].mask[j] = letter ? 0x20 : 0;
    }
  }
  return folded;
}

inline constexpr std::array<FoldedName, kFieldNames.size()> kFoldedNames = make_folded_names();

template <typename Word>
inline bool word_matches(const char* given, const FoldedName& known, size_t at) {
  Word x, mask, lower;
  std::memcpy(&x, given + at, sizeof x);
  std::memcpy(&mask, known.mask.data() + at, sizeof mask);
  std::memcpy(&lower, known.lower.data() + at, sizeof lower);
  return (x | mask) == lower;
}

// Whether `given` is `known`'s name, in words (the last one overlapping).
inline bool same_name(std::string_view given, const FoldedName& known) {
  const char* p = given.data();
  const size_t n = given.size();
  if (n >= 8) {
    for (size_t at = 0; at + 8 < n; at += 8) {
      if (!word_matches<uint64_t>(p, known, at)) return false;
    }
    return word_matches<uint64_t>(p, known, n - 8);
  }
  if (n >= 4) return word_matches<uint32_t>(p, known, 0) && word_matches<uint32_t>(p, known, n - 4);
  for (size_t i = 0; i < n; ++i) {
    if ((p[i] | known.mask[i]) != known.lower[i]) return false;
  }
  return true;
}

}  // namespace detail

// The name as HTTP/1 writes it ("Content-Length"); "" for kOther.
constexpr std::string_view field_name(FieldId id) { return detail::kFieldNames[static_cast<size_t>(id)]; }

// The id of a field name in any case, or kOther.
inline FieldId field_id(std::string_view name) {
  if (name.empty() || name.size() >= detail::kMaxKnownLength) return FieldId::kOther;
  const unsigned letter = (static_cast<unsigned char>(name[0]) | 0x20u) - 'a';
  if (letter >= 26) return FieldId::kOther;
  const FieldId id = detail::kFieldShapes[name.size()][letter];
  if (id == FieldId::kOther || !detail::same_name(name, detail::kFoldedNames[static_cast<size_t>(id)])) {
    return FieldId::kOther;
  }
  return id;
}

}  // namespace tern::http
