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

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
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
    // Refused, and the first refusal of this key in this second: worth a
    // log line.
    bool first_this_second = false;
  };
  // What has been counted, since the table was made.
  struct Counts {
    uint64_t delayed = 0;
    uint64_t refused = 0;
  };

  // A new table; or, with `previous` of the same `size`, that one's keys
  // and counts (a reload that keeps a limit keeps its state).
  explicit RateLimit(const RateLimitOptions& options, const RateLimit* previous = nullptr);

  // Counts a request for `key` at `now_ms` (a steady clock, in ms) if it
  // is allowed; a refused one counts for nothing.
  Verdict check(std::string_view key, int64_t now_ms);

  const RateLimitOptions& options() const { return options_; }
  size_t keys() const { return state_->table.size(); }
  Counts counts() const {
    return {state_->delayed.load(std::memory_order_relaxed), state_->refused.load(std::memory_order_relaxed)};
  }

 private:
  struct Bucket {
    int64_t excess = 0;  // thousandths of a request beyond the rate
    int64_t last = 0;    // when it was last counted, ms
    int64_t logged = -1;  // the second a refusal was last logged
  };
  struct State {
    explicit State(size_t size) : table(size) {}
    KeyTable<Bucket> table;
    std::atomic<uint64_t> delayed{0};
    std::atomic<uint64_t> refused{0};
  };

  const RateLimitOptions options_;
  std::shared_ptr<State> state_;
};

}  // namespace tern::server
