#include "auth/rate_limiter.h"

#include <cstring>
#include <iterator>

namespace tern::auth {

std::string address_key(const net::InetAddress& peer) {
  if (!peer.is_ipv6()) return peer.to_ip();
  sockaddr_in6 prefix = *reinterpret_cast<const sockaddr_in6*>(peer.sockaddr_ptr());
  if (IN6_IS_ADDR_V4MAPPED(&prefix.sin6_addr)) return peer.to_ip();
  std::memset(prefix.sin6_addr.s6_addr + 8, 0, 8);
  return net::InetAddress(prefix).to_ip() + "/64";
}

RateLimiter::RateLimiter(uint32_t limit, std::chrono::seconds window, size_t max_addresses)
    : limit_(limit), window_(window.count() > 0 ? window.count() : 1), max_addresses_(max_addresses) {}

void RateLimiter::expire(Bucket& bucket, int64_t now) const {
  auto kept = bucket.times.begin();
  while (kept != bucket.times.end() && *kept <= now - window_) ++kept;
  bucket.times.erase(bucket.times.begin(), kept);
}

bool RateLimiter::allow(const std::string& address, int64_t now, int64_t* retry_after) {
  std::lock_guard lock(mu_);
  auto it = buckets_.find(address);
  if (it == buckets_.end() && buckets_.size() >= max_addresses_) {
    for (auto entry = buckets_.begin(); entry != buckets_.end();) {
      expire(entry->second, now);
      entry = entry->second.times.empty() ? buckets_.erase(entry) : std::next(entry);
    }
  }
  Bucket* bucket = &overflow_;
  if (it != buckets_.end()) {
    bucket = &it->second;
  } else if (buckets_.size() < max_addresses_) {
    bucket = &buckets_[address];
  }
  expire(*bucket, now);
  if (bucket->times.size() >= limit_) {
    // Until the oldest leaves the window.
    *retry_after = bucket->times.front() + window_ - now;
    return false;
  }
  bucket->times.push_back(now);
  return true;
}

}  // namespace tern::auth
