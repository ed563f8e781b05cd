#include "server/handlers/upstream_cache_tap.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <charconv>
#include <ctime>
#include <utility>

#include "base/log.h"
#include "base/task_pool.h"
#include "cache/freshness.h"
#include "cache/vary.h"
#include "files/static_files.h"
#include "http/error_page.h"
#include "server/cache_zones.h"
#include "server/observability/metrics.h"

namespace tern::server {
namespace {

using cache::EntryHead;
using FillEnd = cache::Zone::FillEnd;
using cache::KeyHash;
using cache::Stored;

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

void log_store_failure(std::string_view zone, const Error& error) {
  // At most a line a second: a full disk fails every fill.
  static std::atomic<int64_t> last{0};
  const int64_t now = unix_now();
  if (last.exchange(now, std::memory_order_relaxed) == now) return;
  TERN_LOG_WARN("cache {}: a response was not stored: {} (it was served all the same)", zone, error.message());
}

// An entry's head for a response the cache may store (`f` its verdict):
// the fields as relayed, less Age (counted into `stored`), Date (a hit
// has its own) and Set-Cookie when f says; and X-Accel-Expires last, not
// relayed (EntryHead::kAccelExpires), so that decide() reads it again on a
// revalidation. Key, vary and variant are the caller's.
void describe(int status, std::span<const http::Header> fields, const cache::Freshness& f, int64_t now,
              EntryHead* head) {
  head->status = status;
  head->fields.clear();
  int64_t age = 0;
  bool aged = false;  // the first Age counts, as for decide()
  const http::Header* accel_expires = nullptr;  // the first, as for decide()
  for (const http::Header& field : fields) {
    if (f.drop_set_cookie && http::iequals(field.name, "Set-Cookie")) continue;
    if (http::iequals(field.name, "Age")) {
      if (aged) continue;
      aged = true;
      const auto [end, error] = std::from_chars(field.value.data(), field.value.data() + field.value.size(), age);
      if (error != std::errc() || age < 0) age = 0;
      continue;
    }
    if (accel_expires == nullptr && http::iequals(field.name, "X-Accel-Expires")) accel_expires = &field;
    if (upstream::is_freshness_field(field.name)) continue;
    head->fields.emplace_back(std::string(field.name), std::string(field.value));
  }
  if (accel_expires != nullptr) head->fields.emplace_back("X-Accel-Expires", std::string(accel_expires->value));
  head->stored = now - std::min<int64_t>(age, int64_t{1} << 31);
  head->expires = now + f.lifetime.count();
  head->stale_while_revalidate = static_cast<uint32_t>(f.stale_while_revalidate.count());
  head->stale_if_error = static_cast<uint32_t>(f.stale_if_error.count());
  head->flags = (f.revalidate ? EntryHead::kRevalidate : 0) | (f.no_stale ? EntryHead::kNoStale : 0) |
                (accel_expires != nullptr ? EntryHead::kAccelExpires : 0);
}

// A field of a 304 that takes the place of the stored response's fields
// of its name (RFC 9111 3.2): not one of the hop's, nor Content-Length.
bool updates_stored(const http::Header& field) {
  return !upstream::is_unrelayed_field(field.name) && !http::iequals(field.name, "Content-Length");
}

// Whether a 304 is about the stored response `head` (RFC 9111 4.3.4): it
// names no ETag, or the entry's. One of another representation updates
// nothing. Compared weakly: an origin that compresses may weaken the ETag
// of its 200 and not of its 304 (nginx's gzip does), and "x" against W/"x"
// is the same response to it.
bool about_stored(const EntryHead& head, std::span<const http::Header> fields) {
  const auto etag = std::find_if(fields.begin(), fields.end(),
                                 [](const http::Header& field) { return http::iequals(field.name, "ETag"); });
  if (etag == fields.end() || etag->value.empty()) return true;
  const std::string_view stored = head.field("ETag");
  return !stored.empty() && etag->value != "*" && files::etag_list_matches_weak(etag->value, stored);
}

// Indexes `entry`, the file `writer` wrote (a failure is logged).
bool insert(cache::Zone& zone, cache::EntryWriter& writer, std::shared_ptr<Stored> entry, int64_t now) {
  entry->path = writer.path();
  Result<void> done = zone.insert(writer, std::move(entry), now);
  if (!done) log_store_failure(zone.options().name, done.error());
  return static_cast<bool>(done);
}

// Writes `entry` (`stale` with a new head) as a new file under its name,
// with stale's body, unless stale was purged, removed or replaced meanwhile.
// Any thread.
void copy_entry(cache::Zone& zone, const Stored& stale, std::shared_ptr<Stored> entry, int64_t now) {
  cache::EntryWriter writer;
  Result<void> done = writer.open(zone.options().path, entry->hash, entry->head);
  if (done && stale.body_in_memory) {
    done = writer.append(stale.body);
  } else if (done) {
    const int fd = ::open(stale.path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && ::fstat(fd, &st) == 0 && st.st_ino == stale.inode) {
      done = writer.append_file(fd, stale.head.body_offset, stale.head.body_size);
    } else {
      done = Error{ENOENT, "cache entry copy"};  // replaced or evicted meanwhile
    }
    if (fd >= 0) ::close(fd);
  }
  if (!done) {
    if (done.error().code != ENOENT) log_store_failure(zone.options().name, done.error());
    return;
  }
  if (!zone.holds(stale)) return writer.abandon();  // purged or filled again while it was copied
  insert(zone, writer, std::move(entry), now);
}

}  // namespace

UpstreamCache::Tap::Tap(const UpstreamCache* cache, std::string key, const http::Request& request, bool fill,
                        const KeyHash& lock_hash, uint64_t lock, std::shared_ptr<const Stored> stale,
                        bool invalidate)
    : cache_(cache),
      zone_(cache->zone_),
      key_(std::move(key)),
      key_hash_(KeyHash::of(key_)),
      request_(&request),
      authorized_(request.has_header(http::FieldId::kAuthorization)),
      fill_(fill),
      invalidate_(invalidate),
      lock_hash_(lock_hash),
      lock_(lock),
      stale_(std::move(stale)) {
  if (fill_ && stale_ && cache_->revalidate_) {
    // Views into the stale entry's head, which the tap holds.
    if (const std::string_view etag = stale_->head.field("ETag"); !etag.empty()) {
      conditions_[conditions_size_++] = {"If-None-Match", etag};
    }
    if (const std::string_view modified = stale_->head.field("Last-Modified"); !modified.empty()) {
      conditions_[conditions_size_++] = {"If-Modified-Since", modified};
    }
  }
}

UpstreamCache::Tap::~Tap() { release(unfilled(writer_.is_open())); }

void UpstreamCache::Tap::on_client_gone(const http::Request& request) {
  request_ = nullptr;
  if (head_seen_) return;  // its Vary is read already
  for (const http::Header& field : request.headers()) {
    request_fields_.emplace_back(std::string(field.name), std::string(field.value));
  }
}

void UpstreamCache::Tap::on_head(int status, std::span<const http::Header> fields) {
  head_seen_ = true;
  status_ = status;
  if (invalidate_ && status < 400) cache_->invalidate(key_);
  if (!fill_) return;
  if (!decided_) {  // else as client_answer() found it
    const int64_t at = unix_now();
    decided_.emplace(cache::decide(status, fields, authorized_, cache_->policy_, at), at);
  }
  const auto& [f, now] = *decided_;
  if (!f.store) return release(unfilled(false));
  head_.key = key_;
  head_.vary = cache::vary_names(fields);
  head_.variant = request_ != nullptr ? cache::variant_of(*request_, head_.vary)
                                      : cache::variant_of(request_fields_, head_.vary);
  describe(status, fields, f, now, &head_);
  if (!head_.vary.empty()) {
    // Under the epoch of the key's marker, if it names the same fields;
    // else under a new one, which its own marker will carry.
    const std::shared_ptr<const Stored> marker = find_marker(*zone_, key_, key_hash_, now);
    epoch_ = marker && marker->head.vary == head_.vary ? marker->head.variant : cache::new_epoch();
  }
  hash_ = head_.vary.empty() ? key_hash_ : cache::variant_hash(key_, epoch_, head_.variant);
  if (Result<void> opened = writer_.open(zone_->options().path, hash_, head_); !opened) {
    log_store_failure(zone_->options().name, opened.error());
    release(FillEnd::kSettled);
  }
}

void UpstreamCache::Tap::on_body(std::string_view piece) {
  if (!writer_.is_open()) return;
  if (writer_.body_size() + piece.size() > zone_->options().max_size / 8) {
    writer_.abandon();  // an eighth of the zone at most
    return release(FillEnd::kSettled);
  }
  if (Result<void> written = writer_.append(piece); !written) {
    log_store_failure(zone_->options().name, written.error());
    return release(FillEnd::kSettled);
  }
  if (writer_.body_size() <= zone_->options().memory_body_max) {
    body_.append(piece);
  } else {
    body_.clear();
  }
}

void UpstreamCache::Tap::on_end(bool complete) {
  if (!writer_.is_open() || !complete) {
    const bool cut_short = writer_.is_open();
    writer_.abandon();
    return release(unfilled(cut_short));
  }
  const int64_t now = unix_now();
  auto stored = std::make_shared<Stored>();
  stored->hash = hash_;
  stored->head = std::move(head_);
  stored->head.body_size = writer_.body_size();
  if (stored->head.body_size <= zone_->options().memory_body_max) {
    stored->body = std::move(body_);
    stored->body_in_memory = true;
  }
  std::vector<std::string> vary = stored->head.vary;
  const int64_t expires = stored->head.expires;
  if (insert(*zone_, writer_, std::move(stored), now) && !vary.empty()) insert_marker(std::move(vary), expires, now);
  release(FillEnd::kSettled);
}

bool UpstreamCache::Tap::answer_instead(http::Exchange* client, int status, std::span<const http::Header> fields,
                                        bool failure) {
  if (!failure) status_ = status;
  if (!stale_) return false;
  const int64_t now = unix_now();
  if (!failure && status == 304 && conditions_size_ > 0) return refresh(client, fields, now);
  // Not an entry purged (or replaced) while the application was asked.
  if (!cache_->may_serve_stale(stale_->head, now, status, failure) || !zone_->holds(*stale_)) return false;
  failed_ = true;
  // The client went: the stale entry stays for those to come, rather than
  // the failure it would have answered in place of.
  if (client == nullptr) return true;
  http::Exchange& exchange = *client;
  std::string cache_status = "tern; fwd=stale";
  if (!failure) cache_status.append("; fwd-status=").append(std::to_string(status));
  cache_status.append("; ttl=").append(std::to_string(stale_->head.expires - now)).append("; detail=");
  cache_status.append(failure ? (status == 504 ? "timeout" : "error") : "status");
  cache_->serve(*stale_, now, exchange, cache_status);
  if (!exchange.writer().started()) return false;  // its file went: the failure is answered
  exchange.request().set_cache_status("STALE");
  if (cache_->metrics_ != nullptr) cache_->metrics_->loop(exchange.loop()).response_cache_stale.add();
  return true;  // the call finishes the exchange
}

upstream::ResponseTap::ClientAnswer UpstreamCache::Tap::client_answer(int status,
                                                                     std::span<const http::Header> fields,
                                                                     std::optional<uint64_t> length) {
  // Only a fill asks for the whole response (Asks::whole_response).
  if (!fill_ || request_ == nullptr || status != 200) return {};
  std::string_view etag, last_modified;
  for (const http::Header& field : fields) {
    if (etag.empty() && http::iequals(field.name, "ETag")) etag = field.value;
    if (last_modified.empty() && http::iequals(field.name, "Last-Modified")) last_modified = field.value;
  }
  const Conditional answer = conditional(*request_, etag, last_modified, length);
  if (answer.kind == Conditional::kWhole) return {};
  // Only for a response the entry takes (as nginx): one it will not is
  // relayed as it comes, its connection kept. on_head() keeps the verdict.
  const int64_t now = unix_now();
  decided_.emplace(cache::decide(status, fields, authorized_, cache_->policy_, now), now);
  if (!decided_->first.store || (length && *length > zone_->options().max_size / 8)) return {};
  switch (answer.kind) {
    case Conditional::kPreconditionFailed:
      return {412};
    case Conditional::kNotModified:
      return {304};
    case Conditional::kRange:
      return {206, answer.range.offset, answer.range.length};
    case Conditional::kUnsatisfiable:
      return {416};
    case Conditional::kWhole:
      break;
  }
  return {};
}

FillEnd UpstreamCache::Tap::unfilled(bool cut_short) const {
  // A server error is the origin failing as much as no answer is: the next
  // request may well be answered, and those waiting send it one at a time.
  return failed_ || cut_short || status_ == 0 || status_ >= 500 ? FillEnd::kFailed : FillEnd::kSettled;
}

void UpstreamCache::Tap::release(FillEnd end) {
  if (lock_ == 0) return;
  zone_->end_fill(lock_hash_, std::exchange(lock_, 0), end);
}

bool UpstreamCache::Tap::refresh(http::Exchange* exchange, std::span<const http::Header> fields, int64_t now) {
  const EntryHead& old = stale_->head;
  if (!about_stored(old, fields)) return mismatched(exchange, now);
  // The entry keeps its own ETag, which the 304's may match only weakly
  // ("x" for a stored W/"x"): the stored body is what it names.
  const bool keeps_etag = !old.field("ETag").empty();
  auto updates = [keeps_etag](const http::Header& field) {
    return updates_stored(field) && !(keeps_etag && http::iequals(field.name, "ETag"));
  };
  // The 304's Date and X-Accel-Expires too: decide() reads them (its
  // X-Accel-Expires in place of the one kept with the entry).
  auto taken = [&updates](const http::Header& field) {
    return updates(field) || upstream::is_freshness_field(field.name);
  };
  std::vector<http::Header> merged;
  for (const auto& [name, value] : old.fields) {
    const bool replaced = std::any_of(fields.begin(), fields.end(), [&](const http::Header& field) {
      return taken(field) && http::iequals(field.name, name);
    });
    if (!replaced) merged.push_back({name, value});
  }
  for (const http::Header& field : fields) {
    if (taken(field)) merged.push_back(field);
  }
  // A 304 confirms the entry's body for this request; an entry purged
  // while the application was asked is not stored again (nor one another
  // fill replaced: that one stays).
  const cache::Freshness f = cache::decide(old.status, merged, authorized_, cache_->policy_, now);
  const bool keep = f.store && zone_->holds(*stale_);
  auto entry = std::make_shared<Stored>(*stale_);
  describe(old.status, merged, f, now, &entry->head);
  if (exchange != nullptr) {
    std::string cache_status = "tern; fwd=stale; fwd-status=304";
    if (keep && !f.revalidate) cache_status.append("; ttl=").append(std::to_string(entry->head.expires - now));
    // From the stale entry's file, open before it is replaced or removed (a
    // file being sent stays).
    cache_->serve(*entry, now, *exchange, cache_status);
    if (!exchange->writer().started()) {
      // Its file went while the application was asked (evicted): no entry,
      // and a waiting request fills it.
      release(FillEnd::kFailed);
      TERN_LOG_WARN("cache {}: the entry of {} went while it was revalidated", zone_->options().name, key_);
      http::write_error_page(exchange->writer(), 502);
      return true;
    }
  }
  if (keep) {
    store_again(std::move(entry), now);
  } else {
    release(FillEnd::kSettled);
    zone_->forget(*stale_);  // it may not be kept any longer
  }
  if (exchange == nullptr) return true;  // stored again for those to come
  exchange->request().set_cache_status("REVALIDATED");
  if (cache_->metrics_ != nullptr) cache_->metrics_->loop(exchange->loop()).response_cache_revalidated.add();
  return true;  // the call finishes the exchange
}

bool UpstreamCache::Tap::mismatched(http::Exchange* exchange, int64_t now) {
  // The entry is outdated, and the 304 says nothing of the new response:
  // it goes, and the next request fills the key anew (a waiting one first).
  // This client is answered with the entry as it was stored, whose body and
  // validators agree.
  TERN_LOG_WARN("cache {}: {} answered a revalidation with a 304 of another ETag; its entry is dropped",
                zone_->options().name, key_);
  if (exchange != nullptr) {
    std::string cache_status = "tern; fwd=stale; fwd-status=304; detail=mismatch";
    cache_->serve(*stale_, now, *exchange, cache_status);
    if (!exchange->writer().started()) http::write_error_page(exchange->writer(), 502);  // its file went
    exchange->request().set_cache_status("EXPIRED");
  }
  // Gone (its file, once sent, too) before those waiting wake: the first
  // of them fills it anew.
  zone_->forget(*stale_);
  release(FillEnd::kFailed);
  return true;  // the call finishes the exchange
}

void UpstreamCache::Tap::store_again(std::shared_ptr<Stored> entry, int64_t now) {
  // The fill stays held until the new entry is indexed: those waiting for
  // it are then answered from it.
  const uint64_t lock = std::exchange(lock_, 0);
  auto copy = [zone = zone_, stale = stale_, entry = std::move(entry), fill = lock_hash_, lock, now]() mutable {
    copy_entry(*zone, *stale, std::move(entry), now);
    if (lock != 0) zone->end_fill(fill, lock, FillEnd::kSettled);
  };
  // A body in memory is written at once; one in a file is copied off the
  // loop, which may take a while for a body of many MiB.
  TaskPool* tasks = stale_->body_in_memory ? nullptr : cache_->zones_->tasks();
  if (tasks == nullptr || !tasks->submit(copy)) copy();
}

void UpstreamCache::Tap::insert_marker(std::vector<std::string> vary, int64_t expires, int64_t now) {
  // A marker of the same fields and another epoch came meanwhile (an
  // unsafe method ended the variants): it stays, and this variant, stored
  // under the old epoch, is never found. One of other fields gives way (the
  // application's Vary changed), as before.
  const std::shared_ptr<const Stored> current = find_marker(*zone_, key_, key_hash_, now);
  if (current && current->head.vary == vary && current->head.variant != epoch_) return;
  store_marker(*zone_, key_, std::move(vary), epoch_, expires, now);
}

std::shared_ptr<const Stored> find_marker(cache::Zone& zone, const std::string& key, const cache::KeyHash& hash,
                                          int64_t now) {
  std::shared_ptr<const Stored> found = zone.find(hash, now);
  if (!found || found->head.key != key || (found->head.flags & EntryHead::kVaryMarker) == 0) return nullptr;
  return found;
}

void store_marker(cache::Zone& zone, const std::string& key, std::vector<std::string> vary, std::string epoch,
                  int64_t expires, int64_t now) {
  auto marker = std::make_shared<Stored>();
  marker->hash = KeyHash::of(key);
  marker->head.key = key;
  marker->head.vary = std::move(vary);
  marker->head.variant = std::move(epoch);
  marker->head.stored = now;
  marker->head.expires = expires;
  marker->head.flags = EntryHead::kVaryMarker;
  marker->body_in_memory = true;
  cache::EntryWriter writer;
  if (Result<void> opened = writer.open(zone.options().path, marker->hash, marker->head); !opened) {
    return log_store_failure(zone.options().name, opened.error());
  }
  insert(zone, writer, std::move(marker), now);
}

}  // namespace tern::server
