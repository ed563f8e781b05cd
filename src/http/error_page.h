// The small HTML page tern answers errors with. Any thread (it only writes
// into the given writer).
#pragma once

#include <string_view>

#include "http/response_writer.h"

namespace tern::http {

// Writes a small HTML error page for `status` (and nothing else for HEAD).
// 400, 413, 414, 500 and 501 also end the connection after the response.
void write_error_page(ResponseWriter& writer, int status, std::string_view allow = {});

}  // namespace tern::http
