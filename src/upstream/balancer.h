// Balancer: which server of an upstream group takes the next request.
//
//   Balancer group({{"10.0.0.1:80", 3}, {"10.0.0.2:80", 1}}, Balancer::Method::kRoundRobin);
//   auto server = group.pick(key, tried, now);    // nullopt: none available (502)
//   group.started(*server); ... group.finished(*server);
//   group.failed(*server, now);                  // or group.succeeded(*server)
//
// Methods:
//   kRoundRobin        smooth weighted round-robin (nginx's): over any run of
//                      sum(weights) picks each server gets its weight's share,
//                      interleaved rather than in bursts (5,1,1 -> a a b a c a a);
//   kLeastConnections  the fewest requests in progress for its weight,
//                      round-robin among equals;
//   kHash              consistent hashing of a key (the client's address, a
//                      header, a cookie, the URI) on a ring of 160 points per
//                      unit of weight: a key keeps its server while that
//                      server is available, and when one of N servers leaves
//                      only its keys (about 1/N) move.
//
// Availability (passive health, as nginx's max_fails and fail_timeout): a
// server that failed max_fails times within fail_timeout is skipped for
// fail_timeout, then tried again (one success clears its count); a server
// the active health check marked down (set_up(false)) is skipped until it
// is marked up. Backup servers take requests only while no primary server
// is available. A retry passes the servers already tried, which are
// skipped; when every server is unavailable pick() returns nullopt.
//
// One balancer per loop per group (the counts are that loop's: no locks);
// not thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tern::upstream {

struct ServerSpec {
  std::string address;
  unsigned weight = 1;
  bool backup = false;
  unsigned max_fails = 1;  // 0: failures never take the server out
  std::chrono::milliseconds fail_timeout{10000};
};

class Balancer {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Method : uint8_t { kRoundRobin, kLeastConnections, kHash };

  // At most kMaxServers servers (none: nothing is picked, as for a name not
  // resolved yet); weights of 0 count as 1.
  static constexpr size_t kMaxServers = 64;
  Balancer(std::vector<ServerSpec> servers, Method method);

  // The server for the next request, skipping those whose bit is set in
  // `tried`; `key` is read by kHash only.
  std::optional<size_t> pick(std::string_view key, uint64_t tried, Clock::time_point now);

  // A request went to server i / is over (least connections counts these).
  void started(size_t i);
  void finished(size_t i);
  // The outcome of a request on server i, for passive health.
  void failed(size_t i, Clock::time_point now);
  void succeeded(size_t i);
  // Active health checks: a server marked down is skipped until marked up.
  void set_up(size_t i, bool up);

  bool available(size_t i, Clock::time_point now) const;
  size_t size() const { return servers_.size(); }
  const ServerSpec& spec(size_t i) const { return servers_[i].spec; }
  size_t active(size_t i) const { return servers_[i].active; }
  // Passive health: the server is out until then (the past: it is not).
  Clock::time_point down_until(size_t i) const { return servers_[i].down_until; }

 private:
  struct Server {
    ServerSpec spec;
    int64_t current = 0;  // smooth round-robin state
    size_t active = 0;    // requests in progress
    unsigned fails = 0;   // within the current window
    Clock::time_point first_fail{};
    Clock::time_point down_until{};
    bool up = true;  // the active check's verdict
  };
  struct Point {
    uint64_t hash;
    uint32_t server;
  };

  bool eligible(size_t i, bool backup, uint64_t tried, Clock::time_point now) const;
  std::optional<size_t> round_robin(bool backup, uint64_t tried, Clock::time_point now);
  std::optional<size_t> least_connections(bool backup, uint64_t tried, Clock::time_point now);
  std::optional<size_t> hashed(std::string_view key, bool backup, uint64_t tried, Clock::time_point now);

  std::vector<Server> servers_;
  std::vector<Point> ring_;  // sorted by hash (kHash)
  Method method_;
};

// The 64-bit hash the ring uses (FNV-1a, then a finaliser that spreads
// nearby keys over the whole ring).
uint64_t ring_hash(std::string_view data);

}  // namespace tern::upstream
