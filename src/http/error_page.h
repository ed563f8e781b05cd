// The small HTML page tern answers errors with, unless the writer carries
// an ErrorPageHook that answers the status with a page of its own (a
// site's error_page). Any thread (it only writes into the given writer).
#pragma once

#include <string_view>

#include "http/response_writer.h"

namespace tern::http {

// Answers an error status in place of the built-in page.
class ErrorPageHook {
 public:
  virtual ~ErrorPageHook() = default;
  // Writes the whole response for `status` (with `allow` for a 405) and
  // returns true, or writes nothing and returns false.
  virtual bool write(ResponseWriter& writer, int status, std::string_view allow) = 0;
};

// Writes a small HTML error page for `status` (and nothing else for HEAD).
// 400, 413, 414, 500 and 501 also end the connection after the response.
void write_error_page(ResponseWriter& writer, int status, std::string_view allow = {});

}  // namespace tern::http
