#include "files/static_files.h"

#include <algorithm>
#include <ctime>
#include <optional>
#include <stdexcept>
#include <utility>

#include "http/chars.h"
#include "http/compression.h"
#include "http/http_date.h"
#include "http/uri.h"

namespace tern::files {
namespace {

const MimeTypes& builtin_mime_types() {
  static const MimeTypes types;
  return types;
}

OpenFileCacheOptions cache_options(const StaticFilesOptions& options) {
  OpenFileCacheOptions cache;
  cache.max_entries = options.cache_max_entries;
  cache.valid_for = options.cache_valid_for;
  cache.symlinks = options.symlinks;
  cache.cache_not_found = options.cache_not_found;
  cache.memory_max_file_bytes = options.memory_max_file_bytes;
  cache.max_bytes = options.cache_max_bytes;
  return cache;
}

void check_index_names(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    if (name.empty() || name == "." || name == ".." ||
        name.find_first_of(std::string_view("/\0", 2)) != std::string::npos) {
      throw std::invalid_argument("invalid index file name: \"" + name + "\"");
    }
  }
}

using http::chars::is_ows;
std::string_view trim(std::string_view s) { return http::chars::trim_ows(s); }

std::string_view strip_weak(std::string_view tag) {
  return tag.substr(0, 2) == "W/" ? tag.substr(2) : tag;
}

// If-Range matches only a strong, exact validator: our ETag byte for byte,
// or a date equal to Last-Modified.
bool if_range_matches(std::string_view if_range, const OpenFile& file) {
  if (if_range.front() == '"' || if_range.substr(0, 2) == "W/") return if_range == file.etag();
  std::optional<time_t> date = http::parse_http_date(if_range);
  return date && *date == file.mtime();
}

}  // namespace

bool names_a_dotfile(std::string_view path) {
  constexpr std::string_view kWellKnown = "/.well-known/";
  if (path.starts_with(kWellKnown)) path.remove_prefix(kWellKnown.size() - 1);
  return path.find("/.") != std::string_view::npos;
}

bool accepts_gzip(std::string_view accept_encoding) { return accepts_coding(accept_encoding, "gzip"); }

bool accepts_coding(std::string_view accept_encoding, std::string_view coding) {
  return http::accepted_q(accept_encoding, coding) > 0;
}

namespace {

// An entity-tag list against `etag`: "*" matches any; otherwise by weak
// comparison (W/ prefixes ignored) or by strong (both strong and equal).
// A malformed list matches nothing.
bool etag_list_matches(std::string_view list, std::string_view etag, bool strong) {
  list = trim(list);
  if (list == "*") return true;
  if (strong && etag.starts_with("W/")) return false;
  etag = strip_weak(etag);
  while (!list.empty()) {
    if (list.front() == ',' || is_ows(list.front())) {
      list.remove_prefix(1);
      continue;
    }
    const bool weak = list.starts_with("W/");
    list = strip_weak(list);
    if (list.empty() || list.front() != '"') return false;
    size_t close = list.find('"', 1);
    if (close == std::string_view::npos) return false;
    if (!(strong && weak) && list.substr(0, close + 1) == etag) return true;
    list.remove_prefix(close + 1);
  }
  return false;
}

}  // namespace

bool etag_list_matches_weak(std::string_view list, std::string_view etag) {
  return etag_list_matches(list, etag, false);
}

bool precondition_failed(std::string_view if_match, std::string_view if_unmodified_since, std::string_view etag,
                         std::optional<time_t> last_modified) {
  if (!if_match.empty()) return !etag_list_matches(if_match, etag, true);
  if (if_unmodified_since.empty() || !last_modified) return false;
  const std::optional<time_t> since = http::parse_http_date(if_unmodified_since);
  return since && *last_modified > *since;
}

StaticFiles::StaticFiles(StaticFilesOptions options)
    : options_(std::move(options)),
      mime_types_(options_.mime_types ? *options_.mime_types : builtin_mime_types()),
      cache_(options_.root, cache_options(options_)) {
  check_index_names(options_.index);
}

StaticResult StaticFiles::serve(const StaticRequest& request, Clock::time_point now) {
  StaticResult result;
  const auto refuse_method = [&result] {
    result = StaticResult{};
    result.status = 405;
    result.allow = kAllow;
    return result;
  };
  // As nginx: a POST is looked up first (a missing file is 404, a
  // directory without its slash 301), and refused only where there is
  // something to serve; other methods at once.
  const bool post = request.method == http::Method::kPost;
  if (request.method != http::Method::kGet && request.method != http::Method::kHead && !post) {
    return refuse_method();
  }
  std::string_view name;
  result.status = open_target(request, now, &result, &name);
  if (result.status != 0) return result;
  if (post) return refuse_method();
  if (result.listing) {
    result.status = 200;
    result.send_body = request.method == http::Method::kGet;
    return result;
  }
  select_encoding(request, name, now, &result);
  describe(name, &result);
  if (precondition_failed(request.if_match, request.if_unmodified_since, result.file->etag(),
                          result.file->mtime())) {
    result = StaticResult{};
    result.status = 412;
    return result;
  }
  if (not_modified(request, *result.file)) {
    result.status = 304;
    return result;
  }
  result.status = 200;
  result.length = result.file->size();
  apply_range(request, &result);
  result.send_body = request.method == http::Method::kGet &&
                     (result.status == 200 || result.status == 206);
  return result;
}

// Content type and representation fields. A file served under its own name
// keeps them in its memo; a .gz sibling served for another name (whose type
// it takes) builds them each time.
void StaticFiles::describe(std::string_view name, StaticResult* result) {
  const OpenFile& file = *result->file;
  result->etag = file.etag();
  result->last_modified = file.last_modified();
  const bool sibling = result->gzip || result->brotli;
  OpenFile::HeadMemo& memo = sibling ? gzip_memo_ : file.head_memo();
  if (sibling || memo.content_type.empty()) {
    memo.content_type = mime_types_.lookup(name);
    memo.fields.clear();
    memo.fields.add("Content-Type", memo.content_type);
    memo.fields.add("Last-Modified", result->last_modified);
    memo.fields.add("ETag", result->etag);
  }
  result->content_type = memo.content_type;
  result->fields = &memo.fields;
}

// Maps the request path to a regular file: normalises it, opens it, and for
// a directory either redirects or picks the index file. Returns 0 with
// result->file and *name (the file's path, for its type) set, or the status
// to answer (a 301 also fills in the location).
int StaticFiles::open_target(const StaticRequest& request, Clock::time_point now,
                             StaticResult* result, std::string_view* name) {
  std::string_view path = request.path;
  if (!request.normalized) {
    bool dot_segment = false;
    if (!http::normalize_path(request.path, &path_, &dot_segment)) return 400;
    if (dot_segment && options_.deny_dotfiles && names_a_dotfile(path_)) return 403;
    path = path_;
  }
  OpenFileCache::FileResult found = cache_.find(path, now);
  if (!found) return OpenFileCache::http_status(found.error());
  FilePtr file = std::move(found.value());
  *name = path;
  if (file->is_directory()) {
    const std::string_view uri_path = request.uri_path.empty() ? path : request.uri_path;
    if (uri_path.back() != '/') {
      redirect_to_directory(uri_path, request.query, result);
      return 301;
    }
    if (int status = find_index(path, now, &file); status != 0) {
      if (status != kNoIndex) return status;
      if (!options_.autoindex) return 403;
      result->listing = true;
    } else {
      *name = index_path_;
    }
  }
  result->file = std::move(file);
  return 0;
}

void StaticFiles::redirect_to_directory(std::string_view uri_path, std::string_view query,
                                        StaticResult* result) {
  location_.clear();
  http::append_percent_encoded_path(uri_path, &location_);
  location_ += '/';
  if (!query.empty()) {
    location_ += '?';
    location_ += query;
  }
  result->location = location_;
}

// Tries each index name under the directory `path` (which ends in '/').
// Returns 0 with *file set, or the status to answer. Like nginx, a missing
// index (or one that is a directory) moves on to the next name, while any
// other failure (EACCES, ELOOP) answers at once.
int StaticFiles::find_index(std::string_view path, Clock::time_point now, FilePtr* file) {
  for (const std::string& index : options_.index) {
    index_path_.assign(path).append(index);
    OpenFileCache::FileResult found = cache_.find(index_path_, now);
    if (found && found.value()->is_regular()) {
      *file = std::move(found.value());
      return 0;
    }
    if (!found && OpenFileCache::http_status(found.error()) != 404) {
      return OpenFileCache::http_status(found.error());
    }
  }
  return kNoIndex;
}

std::string_view StaticFiles::index_name(std::string_view path, Clock::time_point now) {
  FilePtr file;
  if (path.empty() || path.back() != '/' || find_index(path, now, &file) != 0) return {};
  return std::string_view(index_path_).substr(path.size());
}

void StaticFiles::select_encoding(const StaticRequest& request, std::string_view name,
                                  Clock::time_point now, StaticResult* result) {
  if (!options_.gzip_static) return;
  // Siblings are looked for only for a client that takes their coding, and
  // the answer is kept with the file (as long as a cached entry is
  // trusted): on a site without them, a client costs no probe at all, and
  // missing siblings take no room in the cache. A client that takes neither
  // coding learns of a sibling (Vary) when it is known.
  OpenFile::HeadMemo& memo = result->file->head_memo();
  // Brotli first: where a client takes both, it is the smaller.
  for (const bool brotli : {true, false}) {
    OpenFile::HeadMemo::Sibling& known = brotli ? memo.br : memo.gz;
    const bool fresh = known.checked_at != Clock::time_point{} &&
                       now - known.checked_at < options_.cache_valid_for;
    const bool accepted = !request.accept_encoding.empty() &&
                          accepts_coding(request.accept_encoding, brotli ? "br" : "gzip");
    if (!accepted) {
      if (fresh && known.found) result->vary_accept_encoding = true;
      continue;
    }
    if (fresh && !known.found) continue;
    gz_path_.assign(name).append(brotli ? ".br" : ".gz");
    OpenFileCache::FileResult sibling = cache_.find(gz_path_, now, /*remember_missing=*/false);
    known.found = sibling && sibling.value()->is_regular();
    known.checked_at = now;
    if (!known.found) continue;
    result->vary_accept_encoding = true;
    if (result->gzip || result->brotli) continue;
    result->file = std::move(sibling.value());
    (brotli ? result->brotli : result->gzip) = true;
  }
}

bool StaticFiles::not_modified(const StaticRequest& request, const OpenFile& file) {
  if (!request.if_none_match.empty()) {
    return etag_list_matches_weak(request.if_none_match, file.etag());
  }
  if (!request.if_modified_since.empty()) {
    std::optional<time_t> since = http::parse_http_date(request.if_modified_since);
    // A date in the future is invalid (RFC 9110 13.1.3): a client that says
    // it has a version from tomorrow has none we sent.
    const int64_t now = request.now != 0 ? request.now : static_cast<int64_t>(::time(nullptr));
    return since && *since <= now && file.mtime() <= *since;
  }
  return false;
}

void StaticFiles::apply_range(const StaticRequest& request, StaticResult* result) {
  if (request.method != http::Method::kGet || request.range.empty()) return;
  const OpenFile& file = *result->file;
  if (!request.if_range.empty() && !if_range_matches(request.if_range, file)) return;
  http::RangeResult range = http::parse_range(request.range, file.size());
  if (range.kind == http::RangeKind::kSingle) {
    result->status = 206;
    result->offset = range.offset;
    result->length = range.length;
    result->content_range_size =
        http::format_content_range(range.offset, range.length, file.size(),
                                   result->content_range_buf)
            .size();
  } else if (range.kind == http::RangeKind::kUnsatisfiable) {
    result->status = 416;
    result->length = 0;
    result->content_range_size =
        http::format_unsatisfied_range(file.size(), result->content_range_buf).size();
  }
}

}  // namespace tern::files
