#include "auth/rate_limiter.h"

#include <cstring>

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

bool RateLimiter::allow(const std::string& address, int64_t now, int64_t* retry_after) {
  const int64_t window_start = now - now % window_;
  std::lock_guard lock(mu_);
  auto it = buckets_.find(address);
  if (it == buckets_.end() && buckets_.size() >= max_addresses_) {
    std::erase_if(buckets_, [window_start](const auto& entry) {
      return entry.second.window_start != window_start;
    });
  }
  Bucket* bucket = &overflow_;
  if (it != buckets_.end()) {
    bucket = &it->second;
  } else if (buckets_.size() < max_addresses_) {
    bucket = &buckets_[address];
  }
  if (bucket->window_start != window_start) *bucket = Bucket{window_start, 0};
  if (bucket->count >= limit_) {
    *retry_after = window_start + window_ - now;
    return false;
  }
  ++bucket->count;
  return true;
}

}  // namespace tern::auth
