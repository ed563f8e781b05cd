// DirectoryHandler: the files beneath a directory, served under a URL
// prefix on HttpServer's chain. With the prefix "/assets/" and the root
// "./public", "/assets/css/site.css" is ./public/css/site.css (nginx's
// alias, Go's StripPrefix and FileServer):
//
//   files::StaticFilesOptions assets;
//   assets.root = "./public";
//   server.add_handler(std::make_unique<files::DirectoryHandler>("/assets/", assets));
//
// The rules are StaticFiles' (static_files.h): GET and HEAD (anything else
// 405), index files, a directory named without its slash redirected to it,
// conditional and range requests, precompressed siblings, dotfiles
// refused; a body goes out with sendfile(2), or from memory for a small
// file the loop's open-file cache keeps, compressed on the way when the
// server's options say so. A path beneath the prefix that names nothing is
// 404 here (it is not passed on), and one outside it passes; the prefix
// named without its slash ("/assets") is the directory, redirected to
// "/assets/". The Router comes first in the chain, so routes of one's own
// win over files of the same path.
//
// Each loop has its own StaticFiles (its open-file cache), made at its
// first request. Shared by the loops.
#pragma once

#include <string>
#include <string_view>

#include "files/static_files.h"
#include "http/handler.h"
#include "net/loop_local.h"

namespace tern::files {

class DirectoryHandler final : public http::RequestHandler {
 public:
  // Throws std::invalid_argument for a prefix that does not start with
  // '/', and what StaticFiles throws: std::system_error when the root
  // cannot be opened, std::invalid_argument for a bad index name.
  DirectoryHandler(std::string_view prefix, StaticFilesOptions options);

  DirectoryHandler(const DirectoryHandler&) = delete;
  DirectoryHandler& operator=(const DirectoryHandler&) = delete;

  // A path beneath the prefix (or one that cannot be decoded, sent
  // beneath it) is this handler's; any other passes.
  http::Claim claim(http::Route& route) override;
  // The file, a redirect, or a refusal (see above).
  void respond(const http::Route& route, http::ResponseWriter& writer) override;

 private:
  struct LoopFiles {
    explicit LoopFiles(const StaticFilesOptions& options) : files(options) {}
    StaticFiles files;
    std::string path;  // scratch: the request's normalised path
  };

  // The file `path` (normalised) names beneath the root: what follows the
  // prefix ("/" for the prefix itself); false outside the prefix.
  bool beneath(std::string_view path, std::string_view* file) const;
  LoopFiles& loop_files();  // this loop's, made on first use

  std::string prefix_;  // normalised, without a final '/': "" for "/"
  const StaticFilesOptions options_;
  net::LoopLocal<LoopFiles> loops_;
};

}  // namespace tern::files
