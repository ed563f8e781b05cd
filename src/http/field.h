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
// Header-only and constexpr; any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tern::http {

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

// `known` holds letters and '-': a letter matches in either case, '-'
// only itself.
constexpr bool same_name(std::string_view given, std::string_view known) {
  for (size_t i = 0; i < known.size(); ++i) {
    const unsigned x = static_cast<unsigned char>(given[i]);
    const unsigned k = static_cast<unsigned char>(known[i]);
    if (k == '-' ? x != k : (x | 0x20u) != (k | 0x20u)) return false;
  }
  return true;
}

}  // namespace detail

// The name as HTTP/1 writes it ("Content-Length"); "" for kOther.
constexpr std::string_view field_name(FieldId id) { return detail::kFieldNames[static_cast<size_t>(id)]; }

// The id of a field name in any case, or kOther.
constexpr FieldId field_id(std::string_view name) {
  if (name.empty() || name.size() >= detail::kMaxKnownLength) return FieldId::kOther;
  const unsigned letter = (static_cast<unsigned char>(name[0]) | 0x20u) - 'a';
  if (letter >= 26) return FieldId::kOther;
  const FieldId id = detail::kFieldShapes[name.size()][letter];
  if (id == FieldId::kOther || !detail::same_name(name, field_name(id))) return FieldId::kOther;
  return id;
}

}  // namespace tern::http
