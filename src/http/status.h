// HTTP status codes and their reason phrases (RFC 9110 section 15).
#pragma once

#include <string_view>

namespace tern::http {

// "OK" for 200, "Not Found" for 404, ...; "Unknown" for codes not listed.
std::string_view reason_phrase(int status);

// 1xx, 204 and 304 responses never carry a body (RFC 9110 6.4.1).
inline bool status_has_body(int status) {
  return status >= 200 && status != 204 && status != 304;
}

}  // namespace tern::http
