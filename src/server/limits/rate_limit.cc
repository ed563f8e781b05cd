#include "server/limits/rate_limit.h"

#include <algorithm>

namespace tern::server {

RateLimit::RateLimit(const RateLimitOptions& options) : options_(options), table_(options.size) {}

RateLimit::Verdict RateLimit::check(std::string_view key, int64_t now_ms) {
  const int64_t rate = static_cast<int64_t>(std::max<uint64_t>(options_.rate_milli, 1));
  const int64_t burst = int64_t{options_.burst} * 1000;
  const int64_t delay = int64_t{std::min(options_.delay, options_.burst)} * 1000;
  return table_.with(table_.hash(key), [&](Bucket& bucket, bool fresh) {
    int64_t excess = 0;
    if (!fresh) {
      // A clock that went back (it should not) counts as no time.
      const int64_t elapsed = std::max<int64_t>(now_ms - bucket.last, 0);
      excess = std::max<int64_t>(bucket.excess - rate * elapsed / 1000 + 1000, 0);
    }
    Verdict verdict;
    if (excess > burst) {
      verdict.allowed = false;
      // Until the bucket has drained to where one more fits.
      verdict.wait = std::chrono::milliseconds((excess - burst) * 1000 / rate);
      return verdict;
    }
    bucket.excess = excess;
    bucket.last = now_ms;
    if (excess > delay) verdict.wait = std::chrono::milliseconds((excess - delay) * 1000 / rate);
    return verdict;
  });
}

}  // namespace tern::server
