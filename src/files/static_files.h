// StaticFiles: decides how to answer a GET or HEAD for a file under a
// document root, without touching a socket.
//
// Given the method, the still-encoded path and the few request fields that
// matter, serve() returns a StaticResult: the status, the file to send (an
// OpenFile from this handler's OpenFileCache), the byte range, and the values
// of the headers the caller must write. The caller (the HTTP glue) turns that
// into a response head and sends the body with sendfile(). Keeping the
// decision pure makes every rule below testable with a temporary directory
// and no network.
//
// The rules follow nginx (static, index and gzip_static modules) and
// RFC 9110:
//   - Only GET and HEAD; anything else is 405 with "Allow: GET, HEAD" (a
//     POST once the path is found to name something: a missing file is
//     still 404, a directory without its slash still 301).
//   - The path is decoded and normalised (http::normalize_path); a bad escape,
//     a NUL or ".." above the root is 400.
//   - A directory requested without the trailing slash is 301 to the same
//     path plus "/" (re-encoded, query string kept). With the slash, the index
//     names are tried in order; a directory without one is 403 (nginx: "directory
//     index is forbidden"), or with `autoindex` an HTML listing (result.listing).
//   - Missing -> 404; unreadable, not regular, or a symlink the policy
//     refuses -> 403 (OpenFileCache::http_status).
//   - Preconditions, in RFC 9110 13.2.2's order: If-Match (strong
//     comparison, "*" or a list), else If-Unmodified-Since (mtime > date),
//     failing is 412. Then If-None-Match (weak comparison) decides alone
//     when present; otherwise If-Modified-Since (mtime <= date, whole
//     seconds). A match is 304. A date later than the server's clock is
//     invalid and ignored (RFC 9110 13.1.3).
//   - With deny_dotfiles, a path with a segment starting with '.' (.git/,
//     .env, .htpasswd) is 403, except under /.well-known/ (RFC 8615).
//   - Range applies only to GET and, when If-Range is present, only if it is
//     exactly our ETag (strong comparison) or exactly our Last-Modified date;
//     otherwise the whole file is sent with 200. One satisfiable range is 206,
//     none is 416, several are answered 200 (see http/range.h).
//   - gzip_static: for a client that accepts br or gzip, a "<file>.br" or
//     "<file>.gz" that exists as a regular file is the representation sent
//     (brotli or gzip = true; brotli first), and the response varies by
//     Accept-Encoding (vary_accept_encoding): its size, ETag, Last-Modified
//     and ranges are the sibling's, as in nginx. Content-Type always comes
//     from the original name. A client that accepts neither gets the file
//     itself, without Vary (it suits every client), and costs no probe.
//
// One per event loop (it owns that loop's OpenFileCache). Loop thread only.
// serve() reuses member buffers, so steady-state requests do not allocate;
// the views in a result stay valid until the next serve() call (location) or
// as long as the result holds its file (etag, last_modified).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/range.h"
#include "http/request.h"
#include "files/mime_types.h"
#include "files/open_file_cache.h"

namespace tern::files {

// What StaticFiles is made with.
struct StaticFilesOptions {
  std::string root;                          // the document root directory
  std::vector<std::string> index = {"index.html"};  // tried in order
  SymlinkPolicy symlinks = SymlinkPolicy::kInsideRoot;  // which links beneath the root are followed
  bool gzip_static = true;  // send a "<file>.br" or "<file>.gz" beside a file to clients that take it
  size_t cache_max_entries = 10000;  // see OpenFileCacheOptions
  size_t cache_max_bytes = 32 << 20;   // see OpenFileCacheOptions
  std::chrono::steady_clock::duration cache_valid_for = std::chrono::seconds(1);  // see OpenFileCacheOptions
  bool cache_not_found = true;  // see OpenFileCacheOptions
  size_t memory_max_file_bytes = 16 * 1024;  // see OpenFileCacheOptions
  bool deny_dotfiles = true;  // "/.git/config", "/.env" are 403 (not under "/.well-known/")
  bool autoindex = false;  // a directory without an index is listed (not 403)
  const MimeTypes* mime_types = nullptr;  // not owned, must outlive; null: built-in table
};

// The parts of a request serve() looks at. Empty strings mean "absent".
struct StaticRequest {
  http::Method method = http::Method::kGet;  // GET and HEAD are answered, the rest 405
  std::string_view path;   // the origin-form path, still percent-encoded...
  // ...or already decoded and normalised, and checked for dotfiles (the
  // handler chain's route), when `normalized`.
  bool normalized = false;
  // The request's own path when `path` is another (a location's alias):
  // a directory's 301 goes to it plus "/". Empty: `path`.
  std::string_view uri_path;
  std::string_view query;  // after '?', without it; kept on redirects
  // The request's If-Match, If-Unmodified-Since, If-None-Match,
  // If-Modified-Since, Range, If-Range and Accept-Encoding fields.
  std::string_view if_match;
  std::string_view if_unmodified_since;
  std::string_view if_none_match;
  std::string_view if_modified_since;
  std::string_view range;
  std::string_view if_range;
  std::string_view accept_encoding;
  int64_t now = 0;  // the wall clock, seconds since the epoch; 0: read it
};

// What serve() decided: the status, and what to send with it.
struct StaticResult {
  int status = 500;  // 200, 206, 301, 304, 400, 403, 404, 405, 412, 416 or 500
  // The selected representation, set for 200, 206, 304 and 416 (metadata for
  // the headers even when there is no body).
  std::shared_ptr<const OpenFile> file;
  // For 200 and 206 the bytes [offset, offset + length) are the body and
  // `length` is the Content-Length, also for HEAD. Zero otherwise.
  uint64_t offset = 0;
  uint64_t length = 0;
  bool send_body = false;  // GET answered 200 or 206: send the range of `file`
  bool listing = false;    // 200 for a directory (`file`) to be listed (autoindex)
  bool gzip = false;       // send "Content-Encoding: gzip" (the .gz sibling)
  bool brotli = false;     // send "Content-Encoding: br" (the .br sibling)
  bool vary_accept_encoding = false;  // send "Vary: Accept-Encoding"
  std::string_view content_type;      // with `file`
  std::string_view etag;              // with `file`
  std::string_view last_modified;     // with `file`
  // The three above, prepared to be sent (the file's memo; null until set).
  const http::FieldBlock* fields = nullptr;
  std::string_view location;          // 301: the Location value
  std::string_view allow;             // 405: the Allow value

  // 206: "bytes 0-499/1234"; 416: "bytes */1234"; otherwise empty. Kept
  // inline so a copied result stays valid.
  std::string_view content_range() const { return {content_range_buf.data(), content_range_size}; }
  std::array<char, http::kContentRangeMaxSize> content_range_buf;  // the first content_range_size bytes
  size_t content_range_size = 0;  // the length of content_range()
};

class StaticFiles {
 public:
  using Clock = OpenFileCache::Clock;  // the loop's cached clock is one
  static constexpr std::string_view kAllow = "GET, HEAD";  // a 405's Allow

  // Opens the root. Start-up only: throws std::system_error if the root cannot
  // be opened and std::invalid_argument for an index name that is empty or
  // holds a '/' or is "." or "..".
  explicit StaticFiles(StaticFilesOptions options);

  StaticFiles(const StaticFiles&) = delete;
  StaticFiles& operator=(const StaticFiles&) = delete;

  // `now` is the loop's cached clock; it drives cache revalidation.
  StaticResult serve(const StaticRequest& request, Clock::time_point now);

  // The first index name that is a regular file in the directory `path`
  // (decoded and normalised, ending in '/'): what the web server redirects
  // a directory's request to, internally (path + name), as nginx's index
  // does. Empty when none is, or when one cannot be read: serve() then
  // answers (403, a listing, the error). Valid until the next call.
  std::string_view index_name(std::string_view path, Clock::time_point now);

  OpenFileCache& cache() { return cache_; }  // this loop's open files
  bool hides_dotfiles() const { return options_.deny_dotfiles; }  // deny_dotfiles

 private:
  using FilePtr = std::shared_ptr<const OpenFile>;
  static constexpr int kNoIndex = -1;  // find_index(): no index name exists

  int open_target(const StaticRequest& request, Clock::time_point now, StaticResult* result,
                  std::string_view* name);
  void redirect_to_directory(std::string_view uri_path, std::string_view query, StaticResult* result);
  int find_index(std::string_view path, Clock::time_point now, FilePtr* file);
  void select_encoding(const StaticRequest& request, std::string_view name,
                       Clock::time_point now, StaticResult* result);
  void describe(std::string_view name, StaticResult* result);
  static bool not_modified(const StaticRequest& request, const OpenFile& file);
  static void apply_range(const StaticRequest& request, StaticResult* result);

  const StaticFilesOptions options_;
  const MimeTypes& mime_types_;
  OpenFileCache cache_;
  std::string path_;       // the normalised request path (unless given normalised)
  std::string index_path_;  // the path + an index name
  std::string gz_path_;     // the name of the .gz sibling
  std::string location_;    // a 301's Location
  OpenFile::HeadMemo gzip_memo_;  // describe() for a .gz sibling, rebuilt each time
};

// Whether a normalised path names a dotfile or goes through a dot
// directory ("/.git/config", "/a/.env"), other than under "/.well-known/".
bool names_a_dotfile(std::string_view path);

// Request-field helpers, public so they can be tested on their own. Any thread.

// Accept-Encoding allows gzip: "gzip" or "x-gzip" with a non-zero q, or
// else "*" with a non-zero q. Codings compare case-insensitively.
bool accepts_gzip(std::string_view accept_encoding);
// The same for any coding ("br"): listed with a non-zero q, or "*" is.
bool accepts_coding(std::string_view accept_encoding, std::string_view coding);

// If-None-Match semantics: true for "*" or when any entity-tag in the list
// equals `etag` by weak comparison (W/ prefixes ignored). A malformed list
// matches nothing.
bool etag_list_matches_weak(std::string_view if_none_match, std::string_view etag);

// RFC 9110 13.2.2, its first two steps: If-Match (strong comparison; "*"
// matches any representation) or, without it, If-Unmodified-Since (ignored
// when it is not a date or `last_modified` is unknown). True when the
// request's precondition fails: the answer is 412.
bool precondition_failed(std::string_view if_match, std::string_view if_unmodified_since, std::string_view etag,
                         std::optional<time_t> last_modified);

}  // namespace tern::files
