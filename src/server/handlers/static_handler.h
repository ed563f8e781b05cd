// The HTTP side of static files: turns StaticFiles' decision into a
// response (head fields, then the body with sendfile, or an error page).
//
// Loop thread only (StaticFiles is per loop).
#pragma once

#include <chrono>

#include "http/request.h"
#include "http/response_writer.h"
#include "server/handlers/static_files.h"

namespace tern::server {

// With use_mmap the body is mapped and written from memory (the comparison
// mode TinyWebServer uses); otherwise it goes out with sendfile(2).
void respond_static(StaticFiles& files, const http::Request& request, http::ResponseWriter& writer,
                    std::chrono::steady_clock::time_point now, bool use_mmap = false);

}  // namespace tern::server
