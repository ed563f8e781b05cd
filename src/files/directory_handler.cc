#include "files/directory_handler.h"

#include <stdexcept>
#include <utility>

#include "files/file_response.h"
#include "http/error_page.h"
#include "http/uri.h"
#include "net/event_loop.h"

namespace tern::files {

DirectoryHandler::DirectoryHandler(std::string_view prefix, StaticFilesOptions options)
    : options_(std::move(options)) {
  auto normalized = http::normalize_prefix(prefix);
  if (!normalized) throw std::invalid_argument("a handler's prefix is a path starting with '/': " + std::string(prefix));
  prefix_ = std::move(*normalized);
  // Opened here once, so that a root that cannot be opened fails the
  // program at its start rather than each loop's first request.
  StaticFiles probe(options_);
}

bool DirectoryHandler::beneath(std::string_view path, std::string_view* file) const {
  if (!http::path_beneath(prefix_, path, file)) return false;
  if (file->empty()) *file = "/";  // the prefix itself: the root
  return true;
}

DirectoryHandler::LoopFiles& DirectoryHandler::loop_files() {
  net::EventLoop* loop = net::EventLoop::current();
  LoopFiles* mine = loops_.get(loop);
  return mine != nullptr ? *mine : loops_.emplace(loop, options_);
}

http::Claim DirectoryHandler::claim(http::Route& route) {
  LoopFiles& loop = loop_files();
  std::string_view file;
  auto path = http::normalized_path(route.path, &loop.path);
  // A path that cannot be decoded is this handler's to refuse (400) when it
  // was sent beneath the prefix.
  if (!path) return beneath(route.path, &file) ? http::Claim::kRespond : http::Claim::kPass;
  return beneath(*path, &file) ? http::Claim::kRespond : http::Claim::kPass;
}

void DirectoryHandler::respond(const http::Route& route, http::ResponseWriter& writer) {
  LoopFiles& loop = loop_files();
  std::string_view file;
  bool dot_segment = false;
  auto path = http::normalized_path(route.path, &loop.path, &dot_segment);
  if (!path) return http::write_error_page(writer, 400);
  if (!beneath(*path, &file)) return http::write_error_page(writer, 404);  // "/assets/../x"
  if (dot_segment && options_.deny_dotfiles && names_a_dotfile(file)) {
    return http::write_error_page(writer, 403);
  }
  const StaticTarget target{file, /*normalized=*/true, /*uri_path=*/*path, /*as_get=*/false};
  respond_static(loop.files, *route.request, target, writer, net::EventLoop::current()->clock().now(),
                 /*use_mmap=*/false);
}

}  // namespace tern::files
