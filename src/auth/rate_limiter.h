// RateLimiter: at most N events per client address in any window of the
// given length (login attempts): each address keeps the times of its last
// N events, and an event comes only when the oldest of them has left the
// window. (Fixed windows would let 2N through across a boundary.) Bounded:
// when the table is full, addresses with nothing in the window are swept
// out, and beyond that new addresses share one overflow entry rather than
// growing memory without limit.
//
// Shared by every loop; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "net/inet_address.h"

namespace tern::auth {

// What a per-address limit counts for a client: its address, or for IPv6
// its /64 ("2001:db8:1:2::/64"), which one host or one customer network
// usually holds whole: a client there has billions of addresses to rotate.
std::string address_key(const net::InetAddress& peer);

class RateLimiter {
 public:
  RateLimiter(uint32_t limit, std::chrono::seconds window, size_t max_addresses = 100000);

  // Counts one event for `address` at `now` (seconds); false if it goes
  // over the limit, and then *retry_after says how long until it may.
  bool allow(const std::string& address, int64_t now, int64_t* retry_after);

 private:
  // The times of an address's last events, oldest first, at most limit_.
  struct Bucket {
    std::vector<int64_t> times;
  };
  // Drops the times that have left the window ending at `now`.
  void expire(Bucket& bucket, int64_t now) const;

  const uint32_t limit_;
  const int64_t window_;
  const size_t max_addresses_;
  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;  // guarded by mu_
  Bucket overflow_;                                  // guarded by mu_
};

}  // namespace tern::auth
