// LoginThrottle: failed logins counted per account, with a back-off that
// doubles. After `free_failures` failures in a row an account refuses
// attempts for `first_backoff`; each failure after that doubles the wait,
// up to `max_backoff`; a success clears the account. This slows a guesser
// who spreads its attempts over many addresses, which the per-address
// RateLimiter cannot see. Accounts are keyed case-insensitively, as the
// store matches names.
//
// Counts live in this process: nodes sharing a database each keep their
// own. Bounded: an account forgotten after max_backoff without a failure
// is swept out when the table is full, and beyond max_accounts new
// accounts are not tracked (logged once a second) rather than growing
// memory without limit.
//
// Shared by every loop; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tern::auth {

class LoginThrottle {
 public:
  LoginThrottle(uint32_t free_failures, std::chrono::seconds first_backoff,
                std::chrono::seconds max_backoff, size_t max_accounts = 100000);

  // Whether an attempt on `account` may go ahead at `now` (seconds); if
  // not, *retry_after says how long until it may.
  bool allow(std::string_view account, int64_t now, int64_t* retry_after);
  void failed(std::string_view account, int64_t now);
  void succeeded(std::string_view account);

 private:
  struct Entry {
    uint32_t failures = 0;
    int64_t last_failure = 0;
    int64_t locked_until = 0;
  };
  static std::string key(std::string_view account);

  const uint32_t free_failures_;
  const int64_t first_backoff_;
  const int64_t max_backoff_;
  const size_t max_accounts_;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> accounts_;  // guarded by mu_
};

}  // namespace tern::auth
