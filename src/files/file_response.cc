#include "files/file_response.h"

#include <string>

#include "files/autoindex.h"
#include "http/compression.h"
#include "http/error_page.h"
#include "net/event_loop.h"
#include "net/file_region.h"

namespace tern::files {
namespace {

// A 200 compressed on the way: a weak ETag (another representation), and
// for a file kept in memory the coded copy kept beside it.
void respond_coded(const StaticResult& result, http::Coding coding, http::ResponseWriter& writer) {
  const OpenFile& file = *result.file;
  writer.start(200).header("Content-Type", result.content_type);
  writer.header("Last-Modified", result.last_modified);
  writer.header("ETag", "W/" + std::string(result.etag));
  if (!file.has_content()) {
    net::FileRegion region;
    region.fd = file.fd();
    region.offset = 0;
    region.length = result.length;
    region.keep_alive = result.file;
    return writer.file(std::move(region));
  }
  OpenFile::HeadMemo& memo = file.head_memo();
  std::string& coded = coding == http::Coding::kBrotli ? memo.brotli : memo.gzip;
  if (coded.empty()) coded = http::Compressor::compress(coding, *writer.compression(), file.content());
  writer.coded_body(coded, result.file);
}

}  // namespace

void respond_static(StaticFiles& files, const http::Request& request, const StaticTarget& target,
                    http::ResponseWriter& writer, std::chrono::steady_clock::time_point now,
                    bool use_mmap) {
  const std::string_view path = target.path, uri_path = target.uri_path;
  StaticRequest query;
  query.method = target.as_get && request.method() != http::Method::kHead ? http::Method::kGet
                                                                           : request.method();
  query.path = path;
  query.normalized = target.normalized;
  query.uri_path = uri_path;
  query.query = request.query();
  query.now = net::EventLoop::current() != nullptr ? net::EventLoop::current()->clock().wall_seconds() : 0;
  // One pass over the fields instead of a lookup each (first one wins, as
  // Request::header does).
  for (const http::Header& field : request.headers()) {
    std::string_view* slot = nullptr;
    switch (field.id) {
      case http::FieldId::kIfNoneMatch: slot = &query.if_none_match; break;
      case http::FieldId::kIfModifiedSince: slot = &query.if_modified_since; break;
      case http::FieldId::kRange: slot = &query.range; break;
      case http::FieldId::kIfRange: slot = &query.if_range; break;
      case http::FieldId::kAcceptEncoding: slot = &query.accept_encoding; break;
      case http::FieldId::kOther:
        // Rare names, without a number of their own.
        if (http::iequals(field.name, "If-Match")) {
          slot = &query.if_match;
        } else if (http::iequals(field.name, "If-Unmodified-Since")) {
          slot = &query.if_unmodified_since;
        }
        break;
      default: break;
    }
    if (slot != nullptr && slot->empty()) *slot = field.value;
  }
  StaticResult result = files.serve(query, now);
  if (result.listing) {
    Result<std::string> html =
        render_autoindex(result.file->fd(), uri_path.empty() ? path : uri_path, files.hides_dotfiles());
    if (!html) return http::write_error_page(writer, 403);
    (void)writer.compress_for("text/html", html->size());
    writer.start(200).header("Content-Type", "text/html; charset=utf-8");
    return writer.body(*html);
  }
  // On-the-fly compression (a precompressed sibling is coded already).
  if (writer.compression() != nullptr && !result.gzip && !result.brotli && result.file) {
    // Asked for a 206 or 304 too, for its Vary; only a 200 is compressed.
    const http::Coding coding = writer.compress_for(result.content_type, result.length);
    if (result.status == 200 && coding != http::Coding::kIdentity) return respond_coded(result, coding, writer);
  }

  switch (result.status) {
    case 200:
    case 206:
    case 304:
      break;
    case 301:
      writer.start(301).header("Location", result.location);
      writer.header("Content-Type", "text/html; charset=utf-8");
      writer.body("<!DOCTYPE html>\n<html><body>Moved Permanently</body></html>\n");
      return;
    case 405:
      return http::write_error_page(writer, 405, result.allow);
    case 416:
      writer.start(416).header("Content-Range", result.content_range());
      writer.header("Content-Type", "text/html; charset=utf-8");
      writer.body("<!DOCTYPE html>\n<html><body>Range Not Satisfiable</body></html>\n");
      return;
    default:
      return http::write_error_page(writer, result.status);
  }

  writer.start(result.status);
  writer.fields(*result.fields);  // Content-Type, Last-Modified, ETag
  if (result.gzip) writer.header("Content-Encoding", "gzip");
  if (result.brotli) writer.header("Content-Encoding", "br");
  if (result.vary_accept_encoding && !writer.varies()) writer.header("Vary", "Accept-Encoding");
  if (result.status == 304) return writer.end();
  writer.header("Accept-Ranges", "bytes");
  if (result.status == 206) writer.header("Content-Range", result.content_range());
  if (result.file->has_content() && !use_mmap) {
    // Small file: head and body leave in one write.
    return writer.body(result.file->content().substr(result.offset, result.length), result.file);
  }
  net::FileRegion region;
  region.fd = result.file->fd();
  region.offset = static_cast<off_t>(result.offset);
  region.length = result.length;
  region.keep_alive = result.file;  // keeps the fd open until sent
  if (use_mmap && request.method() == http::Method::kGet) (void)net::map_file_region(&region);
  writer.file(std::move(region));
}

}  // namespace tern::files
