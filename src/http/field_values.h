// The field values whose meaning frames a message, read the same way for
// requests (request.cc) and for responses from upstream servers
// (response_parser.cc): comma-separated lists (RFC 9110 5.6.1),
// Content-Length (RFC 9110 8.6), Transfer-Encoding (RFC 9112 6.1) and the
// Connection options (RFC 9110 7.6.1).
//
// Header-only lists, the rest in field_values.cc; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "http/chars.h"

namespace tern::http::fields {

// Calls f on each element of a comma-separated list with its OWS trimmed,
// empty elements included; stops early (and returns false) when f does.
template <typename F>
bool for_each_element(std::string_view list, F f) {
  for (;;) {
    const size_t comma = list.find(',');
    if (!f(chars::trim_ows(list.substr(0, comma)))) return false;
    if (comma == std::string_view::npos) return true;
    list.remove_prefix(comma + 1);
  }
}

// One Content-Length field: 1*DIGIT, or a list of identical ones ("5, 5"
// is 5). False when it is malformed, overflows, or differs from *length
// (set by an earlier field); else *length is set.
bool note_content_length(std::string_view value, std::optional<uint64_t>* length);

// What the Transfer-Encoding fields of a message say, field by field.
struct TransferCodings {
  bool seen = false;          // a Transfer-Encoding field came
  bool malformed = false;     // an element that is not a transfer-coding
  bool last_chunked = false;  // the final coding so far is chunked
  size_t chunked = 0;         // how many times chunked appears
  size_t others = 0;          // codings other than chunked
  void note(std::string_view value);  // takes one field's value into the above
};

// The Connection options a message carries.
struct ConnectionOptions {
  bool close = false;       // "close" is among them
  bool keep_alive = false;  // "keep-alive" is
  bool upgrade = false;     // "upgrade" is
  void note(std::string_view value);  // takes one field's value into the above
};

}  // namespace tern::http::fields
