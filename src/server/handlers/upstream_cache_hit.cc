// UpstreamCache's answer from a stored entry (a hit, a stale entry in
// place of a failure or while another request refreshes it, a
// revalidated entry): preconditions, conditional requests, a range,
// compression on the way, the body from memory or the entry's file. The
// lookup, the fills and their locks are in upstream_cache.cc.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>

#include "files/open_file_cache.h"
#include "files/static_files.h"
#include "http/error_page.h"
#include "http/http_date.h"
#include "http/range.h"
#include "net/event_loop.h"
#include "server/cache_zones.h"
#include "server/handlers/upstream_cache.h"

namespace tern::server {
namespace {

using cache::EntryHead;
using cache::Stored;

// A body from a file is compressed (read into memory) up to this size;
// beyond it a hit goes out as stored, by sendfile.
constexpr uint64_t kCompressFromFile = 1 << 20;

// A stored response's field as a hit sends it: its ETag weak when the
// body is compressed on the way, its "Vary: Accept-Encoding" left to the
// writer when the writer adds one.
void write_stored_field(http::ResponseWriter& w, bool coded, const std::string& name, const std::string& value) {
  if (coded && http::iequals(name, "ETag") && !value.starts_with("W/")) {
    w.header(name, "W/" + value);
  } else if (!(w.varies() && http::iequals(name, "Vary") && http::iequals(value, "Accept-Encoding"))) {
    w.header(name, value);
  }
}

}  // namespace

UpstreamCache::Conditional UpstreamCache::conditional(const http::Request& request, std::string_view etag,
                                                      std::string_view last_modified,
                                                      std::optional<uint64_t> body_size) {
  std::string_view if_match, if_unmodified_since;
  for (const http::Header& field : request.headers()) {
    if (field.id != http::FieldId::kOther) continue;
    if (if_match.empty() && http::iequals(field.name, "If-Match")) if_match = field.value;
    if (if_unmodified_since.empty() && http::iequals(field.name, "If-Unmodified-Since")) {
      if_unmodified_since = field.value;
    }
  }
  if ((!if_match.empty() || !if_unmodified_since.empty()) &&
      files::precondition_failed(if_match, if_unmodified_since, etag, http::parse_http_date(last_modified))) {
    return {Conditional::kPreconditionFailed, {}};
  }
  bool not_modified = false;
  if (const std::string_view inm = request.header(http::FieldId::kIfNoneMatch); !inm.empty()) {
    not_modified = files::etag_list_matches_weak(inm, etag);  // "*" matches a response without ETag too
  } else if (const std::string_view ims = request.header(http::FieldId::kIfModifiedSince); !ims.empty()) {
    const std::optional<time_t> since = http::parse_http_date(ims);
    const std::optional<time_t> modified = http::parse_http_date(last_modified);
    not_modified = since && modified && *modified <= *since;
  }
  if (not_modified) return {Conditional::kNotModified, {}};
  if (!body_size || request.method() != http::Method::kGet) return {};
  const std::string_view if_range = request.header(http::FieldId::kIfRange);
  if (!if_range.empty() && !(!etag.empty() && if_range == etag && !etag.starts_with("W/")) &&
      !(!last_modified.empty() && if_range == last_modified)) {
    return {};
  }
  const http::RangeResult range = http::parse_range(request.header(http::FieldId::kRange), *body_size);
  if (range.kind == http::RangeKind::kSingle) return {Conditional::kRange, range};
  if (range.kind == http::RangeKind::kUnsatisfiable) return {Conditional::kUnsatisfiable, {}};
  return {};
}

void UpstreamCache::serve(const Stored& entry, int64_t now, http::Exchange& exchange, std::string_view given) const {
  const http::Request& request = exchange.request();
  const EntryHead& head = entry.head;
  char age[24];
  const auto age_end = std::to_chars(age, age + sizeof age, std::max<int64_t>(now - head.stored, 0)).ptr;
  const std::string status =
      !given.empty() ? std::string(given) : "tern; hit; ttl=" + std::to_string(head.expires - now);
  http::ResponseWriter& w = exchange.writer();
  auto common = [&](http::ResponseWriter& writer) {
    writer.header("Age", std::string_view(age, static_cast<size_t>(age_end - age)));
    writer.header("Cache-Status", status);
  };

  // The request's conditions, answered from the entry's validators.
  const Conditional answer = head.status == 200
                                 ? conditional(request, head.field("ETag"), head.field("Last-Modified"), head.body_size)
                                 : Conditional{};
  if (answer.kind == Conditional::kPreconditionFailed) return http::write_error_page(w, 412, {"Cache-Status", status});
  // Whether a 200 would be compressed on the way (its ETag then weak):
  // a 304 says what the 200 would (RFC 9110 15.4.5), Vary included.
  const bool compressible = head.status == 200 && head.field("Content-Encoding").empty() &&
                            (entry.body_in_memory || head.body_size <= kCompressFromFile);
  if (answer.kind == Conditional::kNotModified) {
    const bool coded =
        compressible && w.compress_for(head.field("Content-Type"), head.body_size) != http::Coding::kIdentity;
    w.start(304);
    for (const auto& [name, value] : head.relayed_fields()) {
      for (std::string_view kept : {"ETag", "Last-Modified", "Cache-Control", "Expires", "Vary", "Content-Location"}) {
        if (!http::iequals(name, kept)) continue;
        write_stored_field(w, coded, name, value);
      }
    }
    common(w);
    return w.end();
  }

  // The body's bytes: in memory, or the entry's file (the same file the
  // index knows, not a later one under its name).
  std::string_view body = entry.body;
  std::shared_ptr<const files::OpenFile> file;
  if (!entry.body_in_memory) {
    file = open_file(entry);
    if (!file) return;  // not started: the caller goes to the application
  }
  const int fd = file ? file->fd() : -1;

  // One range of a whole body.
  http::RangeResult range;
  if (answer.kind == Conditional::kRange) range = answer.range;
  if (answer.kind == Conditional::kUnsatisfiable) range.kind = http::RangeKind::kUnsatisfiable;
  std::string read;  // a file's body, read to be compressed
  if (range.kind == http::RangeKind::kNone && compressible) {
    if (w.compress_for(head.field("Content-Type"), head.body_size) != http::Coding::kIdentity &&
        !entry.body_in_memory) {
      read.resize(head.body_size);
      if (::pread(fd, read.data(), read.size(), static_cast<off_t>(head.body_offset)) !=
          static_cast<ssize_t>(read.size())) {
        return;  // not started
      }
      body = read;
    }
  }
  const bool coded = w.compressing_body();
  const int status_code = range.kind == http::RangeKind::kSingle          ? 206
                          : range.kind == http::RangeKind::kUnsatisfiable ? 416
                                                                           : head.status;
  w.start(status_code);
  for (const auto& [name, value] : head.relayed_fields()) write_stored_field(w, coded, name, value);
  common(w);
  if (range.kind == http::RangeKind::kUnsatisfiable) {
    char buffer[32];
    const auto end = std::to_chars(buffer, buffer + sizeof buffer, head.body_size).ptr;
    w.header("Content-Range", "bytes */" + std::string(buffer, end));
    return w.end();
  }
  uint64_t offset = 0;
  uint64_t length = head.body_size;
  if (range.kind == http::RangeKind::kSingle) {
    std::array<char, http::kContentRangeMaxSize> buffer;
    w.header("Content-Range", http::format_content_range(range.offset, range.length, head.body_size, buffer));
    offset = range.offset;
    length = range.length;
  }
  if (fd >= 0 && read.empty()) {
    net::FileRegion region;
    region.fd = fd;
    region.offset = static_cast<off_t>(head.body_offset + offset);
    region.length = length;
    region.keep_alive = file;
    return w.file(std::move(region));
  }
  return w.body(body.substr(offset, length));
}

std::shared_ptr<const files::OpenFile> UpstreamCache::open_file(const Stored& entry) const {
  files::OpenFileCache* files = zones_ != nullptr ? zones_->entry_files(*zone_) : nullptr;
  if (files == nullptr) return nullptr;  // the zone's directory could not be opened (logged)
  const uint64_t size = entry.head.body_offset + entry.head.body_size;
  auto is_entry = [&](const files::OpenFile& file) { return file.inode() == entry.inode && file.size() == size; };
  // The entry's path beneath the zone's directory ("/3f/a0/3fa0...").
  const std::string_view name = std::string_view(entry.path).substr(zone_->options().path.size());
  const auto now = net::EventLoop::current()->clock().now();
  files::OpenFileCache::FileResult found = files->find(name, now);
  if (found && !is_entry(*found.value())) {
    files->forget(name);  // an earlier entry's file, or a later one's the index does not know yet
    found = files->find(name, now);
  }
  if (!found && found.error().code == ENOENT) zone_->forget(entry);  // removed from under the zone
  if (!found || !is_entry(*found.value())) return nullptr;
  return found.value();
}

}  // namespace tern::server
