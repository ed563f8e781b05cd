// The HTTP side of static files: turns StaticFiles' decision into a
// response (head fields, then the body with sendfile, a listing, or an
// error page), compressing on the way when the writer is set to.
//
// Loop thread only (StaticFiles is per loop).
#pragma once

#include <chrono>
#include <string_view>

#include "files/static_files.h"
#include "http/request.h"
#include "http/response_writer.h"

namespace tern::files {

// Which file: the request's own path (still encoded), or from the handler
// chain the file at a decoded and normalised `path` for a request whose own
// normalised path is `uri_path` (they differ under an alias).
struct StaticTarget {
  std::string_view path;  // the file's path beneath the root
  bool normalized = false;  // `path` is decoded, normalised and checked for dotfiles
  std::string_view uri_path;  // the request's own normalised path; empty: `path`
  bool as_get = false;  // answer a POST as a GET (an application's X-Accel-Redirect)
};

// With use_mmap the body is mapped and written from memory (the comparison
// mode TinyWebServer uses); otherwise it goes out with sendfile(2).
void respond_static(StaticFiles& files, const http::Request& request, const StaticTarget& target,
                    http::ResponseWriter& writer, std::chrono::steady_clock::time_point now,
                    bool use_mmap);

// The file the request's own path names (still encoded).
inline void respond_static(StaticFiles& files, const http::Request& request, http::ResponseWriter& writer,
                           std::chrono::steady_clock::time_point now, bool use_mmap = false) {
  respond_static(files, request, StaticTarget{request.path(), false, {}, false}, writer, now, use_mmap);
}

}  // namespace tern::files
