#include "server/limits/rate_limit.h"

#include <algorithm>

namespace tern::server {

RateLimit::RateLimit(const RateLimitOptions& options, const RateLimit* previous)
    : options_(options),
      state_(previous != nullptr && previous->options_.size == options.size ? previous->state_
                                                                            : std::make_shared<State>(options.size)) {}

RateLimit::Verdict RateLimit::check(std::string_view key, int64_t now_ms) {
  const int64_t rate = static_cast<int64_t>(std::max<uint64_t>(options_.rate_milli, 1));
  const int64_t burst = int64_t{options_.burst} * 1000;
  const int64_t delay = int64_t{std::min(options_.delay, options_.burst)} * 1000;
  KeyTable<Bucket>& table = state_->table;
  const Verdict verdict = table.with(table.hash(key), [&](Bucket& bucket, bool fresh) {
    int64_t excess = 0;
    if (!fresh) {
      // A clock that went back (it should not) counts as no time.
      const int64_t elapsed = std::max<int64_t>(now_ms - bucket.last, 0);
      excess = std::max<int64_t>(bucket.excess - rate * elapsed / 1000 + 1000, 0);
    }
    Verdict v;
    if (excess > burst) {
      v.allowed = false;
      // Until the bucket has drained to where one more fits.
      v.wait = std::chrono::milliseconds((excess - burst) * 1000 / rate);
      v.first_this_second = bucket.logged != now_ms / 1000;
      bucket.logged = now_ms / 1000;
      return v;
    }
    bucket.excess = excess;
    bucket.last = now_ms;
    if (excess > delay) v.wait = std::chrono::milliseconds((excess - delay) * 1000 / rate);
    return v;
  });
  // Shared by the workers, but written only when a request is held or
  // refused, not on the way of one that passes.
  if (!verdict.allowed) {
    state_->refused.fetch_add(1, std::memory_order_relaxed);
  } else if (verdict.wait.count() > 0) {
    state_->delayed.fetch_add(1, std::memory_order_relaxed);
  }
  return verdict;
}

}  // namespace tern::server
