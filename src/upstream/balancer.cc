#include "upstream/balancer.h"

#include <algorithm>
#include <stdexcept>

namespace tern::upstream {
namespace {

constexpr unsigned kPointsPerWeight = 160;
constexpr uint64_t kAll = ~uint64_t{0};

bool has(uint64_t set, size_t i) { return ((set >> i) & 1) != 0; }

}  // namespace

uint64_t ring_hash(std::string_view data) {
  uint64_t h = 1469598103934665603ull;
  for (char c : data) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  // MurmurHash3's fmix64.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

Balancer::Balancer(std::vector<ServerSpec> servers, Method method) : method_(method) {
  if (servers.size() > kMaxServers) throw std::invalid_argument("more than 64 servers in an upstream group");
  for (ServerSpec& spec : servers) {
    spec.weight = std::max(spec.weight, 1u);
    Server server;
    server.spec = std::move(spec);
    servers_.push_back(std::move(server));
  }
  if (method_ != Method::kHash) return;
  // The ring holds the primary servers; backups take over by round-robin.
  for (size_t i = 0; i < servers_.size(); ++i) {
    const ServerSpec& spec = servers_[i].spec;
    if (spec.backup) continue;
    for (unsigned v = 0; v < kPointsPerWeight * spec.weight; ++v) {
      ring_.push_back({ring_hash(spec.address + "#" + std::to_string(v)), static_cast<uint32_t>(i)});
    }
  }
  std::sort(ring_.begin(), ring_.end(), [](const Point& a, const Point& b) { return a.hash < b.hash; });
}

bool Balancer::available(size_t i, Clock::time_point now) const {
  const Server& s = servers_[i];
  return s.up && now >= s.down_until;
}

bool Balancer::eligible(size_t i, bool backup, uint64_t tried, Clock::time_point now) const {
  return servers_[i].spec.backup == backup && !has(tried, i) && available(i, now);
}

std::optional<size_t> Balancer::pick(std::string_view key, uint64_t tried, Clock::time_point now) {
  for (const bool backup : {false, true}) {
    std::optional<size_t> chosen;
    if (method_ == Method::kHash && !backup) {
      chosen = hashed(key, backup, tried, now);
    } else if (method_ == Method::kLeastConnections) {
      chosen = least_connections(backup, tried, now);
    } else {
      chosen = round_robin(backup, tried, now);
    }
    if (chosen) return chosen;
  }
  return std::nullopt;
}

// nginx's smooth weighted round-robin: every eligible server's current
// weight grows by its weight, the largest is chosen and gives back the sum.
std::optional<size_t> Balancer::round_robin(bool backup, uint64_t tried, Clock::time_point now) {
  int64_t total = 0;
  Server* best = nullptr;
  size_t best_index = 0;
  for (size_t i = 0; i < servers_.size(); ++i) {
    if (!eligible(i, backup, tried, now)) continue;
    Server& s = servers_[i];
    s.current += s.spec.weight;
    total += s.spec.weight;
    if (best == nullptr || s.current > best->current) {
      best = &s;
      best_index = i;
    }
  }
  if (best == nullptr) return std::nullopt;
  best->current -= total;
  return best_index;
}

// The fewest requests in progress per unit of weight (a/w < b/v compared as
// a*v < b*w); equals share by round-robin.
std::optional<size_t> Balancer::least_connections(bool backup, uint64_t tried, Clock::time_point now) {
  const Server* least = nullptr;
  uint64_t equals = 0;
  for (size_t i = 0; i < servers_.size(); ++i) {
    if (!eligible(i, backup, tried, now)) continue;
    const Server& s = servers_[i];
    const uint64_t lhs = s.active * uint64_t{least ? least->spec.weight : 1};
    const uint64_t rhs = (least ? least->active : 0) * uint64_t{s.spec.weight};
    if (least == nullptr || lhs < rhs) {
      least = &s;
      equals = uint64_t{1} << i;
    } else if (lhs == rhs) {
      equals |= uint64_t{1} << i;
    }
  }
  if (least == nullptr) return std::nullopt;
  return round_robin(backup, tried | (kAll & ~equals), now);
}

// The first available server clockwise from the key's point on the ring.
std::optional<size_t> Balancer::hashed(std::string_view key, bool backup, uint64_t tried,
                                       Clock::time_point now) {
  if (ring_.empty()) return std::nullopt;
  const uint64_t h = ring_hash(key);
  auto it = std::lower_bound(ring_.begin(), ring_.end(), h,
                             [](const Point& p, uint64_t value) { return p.hash < value; });
  size_t at = static_cast<size_t>(it - ring_.begin()) % ring_.size();
  uint64_t seen = 0;  // servers found unavailable, not asked again
  for (size_t step = 0; step < ring_.size(); ++step, at = (at + 1) % ring_.size()) {
    const size_t server = ring_[at].server;
    if (has(seen, server)) continue;
    if (eligible(server, backup, tried, now)) return server;
    seen |= uint64_t{1} << server;
  }
  return std::nullopt;
}

void Balancer::started(size_t i) { ++servers_[i].active; }

void Balancer::finished(size_t i) {
  if (servers_[i].active > 0) --servers_[i].active;
}

void Balancer::failed(size_t i, Clock::time_point now) {
  Server& s = servers_[i];
  if (s.spec.max_fails == 0) return;
  if (s.fails == 0 || now - s.first_fail > s.spec.fail_timeout) {
    s.fails = 0;
    s.first_fail = now;
  }
  if (++s.fails >= s.spec.max_fails) {
    s.down_until = now + s.spec.fail_timeout;
    s.fails = 0;
  }
}

void Balancer::succeeded(size_t i) { servers_[i].fails = 0; }

void Balancer::set_up(size_t i, bool up) { servers_[i].up = up; }

}  // namespace tern::upstream
