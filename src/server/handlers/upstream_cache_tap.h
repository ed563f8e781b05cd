// UpstreamCache::Tap: the cache's part in one call to the application
// (upstream::ResponseTap). It fills the key's entry as the response streams
// to the client; and with a stale entry at hand it answers in the
// application's place when the application confirms the entry (a 304 to
// the revalidation it asked for: the entry takes the 304's fields and a new
// lifetime, RFC 9111 4.3.4) or fails in a way use_stale or the entry's
// stale-if-error allows. Made by UpstreamCache::go(); lives as long as the
// call, on its loop.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/entry_file.h"
#include "cache/zone.h"
#include "server/handlers/upstream_cache.h"
#include "upstream/call.h"

namespace tern::server {

class UpstreamCache::Tap final : public upstream::ResponseTap {
 public:
  // `fill`: the response may fill the entry. `lock` (0: none): the ticket
  // of the fill of `lock_hash` (its key's or its variant's) the tap holds
  // (Zone::begin_fill), released when it knows it stores nothing, or has
  // stored the entry; a call that ends without a response to store (it
  // failed) releases it as failed, and a waiting request fills next.
  // `request` (its exchange's) outlives
  // the response head, where a Vary is read. `stale`: the key's entry,
  // stale, or null. `invalidate` (an unsafe method): a success ends the
  // key's entry.
  Tap(const UpstreamCache* cache, std::string key, const http::Request& request, bool fill,
      const cache::KeyHash& lock_hash, uint64_t lock, std::shared_ptr<const cache::Stored> stale,
      bool invalidate = false);
  ~Tap() override;

  // The preconditions the call sends in place of the client's: a
  // revalidation of the stale entry (views into it), or none.
  std::span<const http::Header> conditions() const { return {conditions_.data(), conditions_size_}; }

  void on_head(int status, std::span<const http::Header> fields) override;
  void on_body(std::string_view piece) override;
  void on_end(bool complete) override;
  bool answer_instead(http::Exchange* exchange, int status, std::span<const http::Header> fields,
                      bool failure) override;
  // A fill's request went without the client's preconditions and Range:
  // they are evaluated on a 200 here (UpstreamCache::conditional()).
  ClientAnswer client_answer(int status, std::span<const http::Header> fields,
                             std::optional<uint64_t> length) override;
  // Until the response is known not to be stored.
  bool wants_rest() const override { return fill_ && (!head_seen_ || writer_.is_open()); }
  // Keeps the request's fields for a Vary the head may name.
  void on_client_gone(const http::Request& request) override;

 private:
  void release(cache::Zone::FillEnd end);
  // How the fill ends when it stores nothing: failed when the origin gave
  // no whole answer (none, one `cut_short`, a server error, one a stale
  // entry answered in place of), else settled (an answer not to keep, or
  // one that could not be written).
  cache::Zone::FillEnd unfilled(bool cut_short) const;
  // The 304 to the revalidation: the stale entry, with the 304's fields and
  // a new lifetime, answers the exchange (if the client is still there) and
  // is stored again.
  bool refresh(http::Exchange* exchange, std::span<const http::Header> fields, int64_t now);
  // A 304 of another representation (another ETag): the entry goes, the
  // exchange is answered with it as it was.
  bool mismatched(http::Exchange* exchange, int64_t now);
  // Writes `entry` (the stale one with a new head) as a new file under its
  // name (a failure leaves the old one in place), then releases the fill:
  // off the loop when the body is in a file (CacheZones::tasks()).
  void store_again(std::shared_ptr<cache::Stored> entry, int64_t now);
  // The marker under the key alone that names the Vary fields, with the
  // epoch the variant was stored under (unless a marker of another epoch
  // came meanwhile).
  void insert_marker(std::vector<std::string> vary, int64_t expires, int64_t now);

  const UpstreamCache* const cache_;
  cache::Zone* const zone_;
  const std::string key_;
  const cache::KeyHash key_hash_;  // hashed once: the entry or the marker
  const http::Request* request_;  // null once the client went (request_fields_)
  std::vector<std::pair<std::string, std::string>> request_fields_;
  const bool authorized_;
  const bool fill_;
  const bool invalidate_;
  std::string epoch_;  // of the marker its variant is stored under (a response with Vary)
  const cache::KeyHash lock_hash_;  // of the fill it holds
  uint64_t lock_;                   // the fill's ticket while the tap holds it, else 0
  const std::shared_ptr<const cache::Stored> stale_;
  std::array<http::Header, 2> conditions_;
  size_t conditions_size_ = 0;
  cache::EntryHead head_;
  cache::KeyHash hash_;
  cache::EntryWriter writer_;
  std::string body_;  // while it is small enough to keep in memory
  bool head_seen_ = false;
  int status_ = 0;  // of the origin's final head, once it came
  // decide()'s verdict on the head and when, as client_answer() took it.
  std::optional<std::pair<cache::Freshness, int64_t>> decided_;
  bool failed_ = false;  // a stale entry answered in place of the origin's failure
};

// The marker of `key` (whose hash is `hash`) in `zone`, or null.
std::shared_ptr<const cache::Stored> find_marker(cache::Zone& zone, const std::string& key, const cache::KeyHash& hash,
                                                 int64_t now);
// Stores the marker of `key`: the Vary fields `vary`, the variants' `epoch`
// (a failure is logged).
void store_marker(cache::Zone& zone, const std::string& key, std::vector<std::string> vary, std::string epoch,
                  int64_t expires, int64_t now);

}  // namespace tern::server
