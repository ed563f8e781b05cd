#include "auth/login_throttle.h"

#include <algorithm>

#include "base/log.h"

namespace tern::auth {

LoginThrottle::LoginThrottle(uint32_t free_failures, std::chrono::seconds first_backoff,
                             std::chrono::seconds max_backoff, size_t max_accounts)
    : free_failures_(std::max<uint32_t>(free_failures, 1)),
      first_backoff_(std::max<int64_t>(first_backoff.count(), 1)),
      max_backoff_(std::max<int64_t>(max_backoff.count(), first_backoff.count())),
      max_accounts_(max_accounts) {}

std::string LoginThrottle::key(std::string_view account) {
  std::string k(account);
  for (char& c : k) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return k;
}

bool LoginThrottle::allow(std::string_view account, int64_t now, int64_t* retry_after) {
  std::lock_guard lock(mu_);
  auto it = accounts_.find(key(account));
  if (it == accounts_.end() || now >= it->second.locked_until) return true;
  *retry_after = it->second.locked_until - now;
  return false;
}

void LoginThrottle::failed(std::string_view account, int64_t now) {
  std::lock_guard lock(mu_);
  std::string k = key(account);
  auto it = accounts_.find(k);
  if (it == accounts_.end()) {
    if (accounts_.size() >= max_accounts_) {
      std::erase_if(accounts_, [this, now](const auto& entry) {
        return now - entry.second.last_failure > max_backoff_;
      });
    }
    if (accounts_.size() >= max_accounts_) {
      TERN_LOG_EVERY_SECOND(spdlog::level::warn,
                            "users: {} accounts with failed logins tracked; not tracking more",
                            accounts_.size());
      return;
    }
    it = accounts_.emplace(std::move(k), Entry{}).first;
  }
  Entry& entry = it->second;
  // A streak ends once the account has been left alone for max_backoff.
  if (now - entry.last_failure > max_backoff_) entry.failures = 0;
  entry.last_failure = now;
  if (++entry.failures < free_failures_) return;
  const uint32_t doublings = std::min<uint32_t>(entry.failures - free_failures_, 30);
  const int64_t backoff = std::min<int64_t>(first_backoff_ << doublings, max_backoff_);
  entry.locked_until = now + backoff;
}

void LoginThrottle::succeeded(std::string_view account) {
  std::lock_guard lock(mu_);
  accounts_.erase(key(account));
}

}  // namespace tern::auth
