// RateLimit: one [[limit]] with a `rate`, nginx's limit_req. Each key (a
// client address, a cookie, ...) has a leaky bucket: it drains at `rate`
// requests a second, every request adds one, and a request that would
// overflow `burst` is refused. Of the requests the bucket holds beyond the
// first, `delay` go at once and the rest wait their turn (paced at the
// rate); `delay = burst` is nginx's nodelay.
//
//   RateLimit api({.rate_milli = 10'000, .burst = 20});   // "10r/s"
//   RateLimit::Verdict v = api.check(client_ip, now_ms);
//   if (!v.allowed) -> 429, Retry-After: ceil(v.wait)
//   else if (v.wait > 0ms) -> handle the request after v.wait
//
// One table for every worker (KeyTable: sharded locks, bounded, no
// allocation per request); the least recently used keys give way when
// `size` are held. Any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "server/limits/key_table.h"

namespace tern::server {

struct RateLimitOptions {
  // Requests a second, in thousandths ("10r/s": 10000, "30r/m": 500).
  uint64_t rate_milli = 1000;
  uint32_t burst = 0;  // requests held beyond the rate
  uint32_t delay = 0;  // of those, sent at once (burst: all, nginx's nodelay)
  size_t size = 100'000;  // keys kept
};

class RateLimit {
 public:
  struct Verdict {
    bool allowed = true;
    // Allowed: how long the request waits for its turn (0: none). Refused:
    // how long until one would be allowed (a Retry-After).
    std::chrono::milliseconds wait{0};
  };

  explicit RateLimit(const RateLimitOptions& options);

  // Counts a request for `key` at `now_ms` (a steady clock, in ms) if it
  // is allowed; a refused one counts for nothing.
  Verdict check(std::string_view key, int64_t now_ms);

  const RateLimitOptions& options() const { return options_; }
  size_t keys() const { return table_.size(); }

 private:
  struct Bucket {
    int64_t excess = 0;  // thousandths of a request beyond the rate
    int64_t last = 0;    // when it was last counted, ms
  };

  const RateLimitOptions options_;
  KeyTable<Bucket> table_;
};

}  // namespace tern::server
