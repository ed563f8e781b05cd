#include "server/limits/key_limits.h"

#include <arpa/inet.h>

#include <ctime>

#include "base/log.h"
#include "net/inet_address.h"

namespace tern::server {

KeyLimits::KeyLimits(const std::vector<KeyLimitConfig>& configs, const KeyLimits* previous) {
  limits_.reserve(configs.size());
  for (const KeyLimitConfig& c : configs) {
    const Limit* before = previous != nullptr ? previous->find(c.name) : nullptr;
    Limit& limit = limits_.emplace_back();
    limit.config = c;
    limit.key = VariableText(c.key);
    if (c.connections != 0) {
      limit.connections = std::make_unique<ConcurrencyLimit>(
          ConcurrencyLimitOptions{.connections = c.connections, .size = c.size},
          before != nullptr ? before->connections.get() : nullptr);
    } else {
      limit.rate = std::make_unique<RateLimit>(
          RateLimitOptions{.rate_milli = c.rate_milli, .burst = c.burst, .delay = c.delay, .size = c.size},
          before != nullptr ? before->rate.get() : nullptr);
    }
  }
}

const KeyLimits::Limit* KeyLimits::find(std::string_view name) const {
  for (const Limit& limit : limits_) {
    if (limit.config.name == name) return &limit;
  }
  return nullptr;
}

ConnectionLimits::ConnectionLimits(std::shared_ptr<const KeyLimits> limits, const std::vector<std::string>& names)
    : keep_(std::move(limits)) {
  for (const std::string& name : names) {
    const KeyLimits::Limit* limit = keep_->find(name);
    if (limit != nullptr && limit->connections) limits_.push_back(limit);
  }
}

bool ConnectionLimits::enter(const net::InetAddress& client) {
  // The key is the address as $remote_addr writes it.
  char ip[INET6_ADDRSTRLEN];
  const std::string_view key(ip, client.to_ip(ip));
  const int64_t now_s = static_cast<int64_t>(::time(nullptr));
  for (size_t i = 0; i < limits_.size(); ++i) {
    ConcurrencyLimit& table = *limits_[i]->connections;
    const ConcurrencyLimit::Verdict verdict = table.acquire(key, now_s);
    if (verdict.allowed) continue;
    if (verdict.first_this_second) {
      TERN_LOG_WARN("limit {}: {} holds {} connections, its limit; closing a new one", limits_[i]->config.name, key,
                    table.options().connections);
    }
    // The places this connection took in the limits before go back.
    for (size_t j = 0; j < i; ++j) limits_[j]->connections->release(key);
    return false;
  }
  return true;
}

void ConnectionLimits::leave(const net::InetAddress& client) {
  char ip[INET6_ADDRSTRLEN];
  const std::string_view key(ip, client.to_ip(ip));
  for (const KeyLimits::Limit* limit : limits_) limit->connections->release(key);
}

}  // namespace tern::server
