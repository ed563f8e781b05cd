// The small HTML page tern answers errors with, unless the writer carries
// an ErrorPageHook that answers the status with a page of its own (a
// site's error_page). Any thread (it only writes into the given writer).
#pragma once

#include <string_view>

#include "http/response_writer.h"

namespace tern::http {

// A field an error response carries: Allow for a 405, Retry-After for a
// 429 (no name: none).
struct ErrorField {
  std::string_view name;   // the field's name; empty: no field
  std::string_view value;  // its value
};

// Answers an error status in place of the built-in page.
class ErrorPageHook {
 public:
  virtual ~ErrorPageHook() = default;
  // Writes the whole response for `status` (with `field`) and returns
  // true, or writes nothing and returns false.
  virtual bool write(ResponseWriter& writer, int status, ErrorField field) = 0;
};

// Writes a small HTML error page for `status` (and nothing else for HEAD),
// with `field`. 400, 413, 414, 500 and 501 also end the connection after
// the response.
void write_error_page(ResponseWriter& writer, int status, ErrorField field = {});
// A 405's, with its Allow ("GET, HEAD").
inline void write_error_page(ResponseWriter& writer, int status, std::string_view allow) {
  write_error_page(writer, status, ErrorField{allow.empty() ? std::string_view() : std::string_view("Allow"), allow});
}

}  // namespace tern::http
