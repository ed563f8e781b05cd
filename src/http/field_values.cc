#include "http/field_values.h"

#include "http/request.h"

namespace tern::http::fields {

bool note_content_length(std::string_view value, std::optional<uint64_t>* length) {
  return for_each_element(value, [length](std::string_view e) {
    if (e.empty()) return false;
    uint64_t n = 0;
    for (char c : e) {
      if (!chars::is_digit(c)) return false;
      // Overflow is an error, never a wrap.
      if (__builtin_mul_overflow(n, 10u, &n) || __builtin_add_overflow(n, c - '0', &n)) return false;
    }
    if (length->has_value() && **length != n) return false;
    *length = n;
    return true;
  });
}

// transfer-coding = token *( OWS ";" OWS transfer-parameter ). Parameters
// of other codings are not examined (no coding but chunked is decoded);
// "chunked" has none.
void TransferCodings::note(std::string_view value) {
  seen = true;
  for_each_element(value, [this](std::string_view e) {
    if (e.empty()) return true;
    size_t n = 0;
    while (n < e.size() && chars::is_tchar(e[n])) ++n;
    const std::string_view params = chars::trim_ows(e.substr(n));
    const bool is_chunked = iequals(e.substr(0, n), "chunked");
    if (n == 0 || (!params.empty() && (params.front() != ';' || is_chunked))) {
      malformed = true;
      return false;
    }
    last_chunked = is_chunked;
    (is_chunked ? chunked : others) += 1;
    return true;
  });
}

void ConnectionOptions::note(std::string_view value) {
  for_each_element(value, [this](std::string_view e) {
    if (iequals(e, "close")) close = true;
    if (iequals(e, "keep-alive")) keep_alive = true;
    if (iequals(e, "upgrade")) upgrade = true;
    return true;
  });
}

}  // namespace tern::http::fields
