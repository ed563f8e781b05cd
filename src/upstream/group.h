// Group: one loop's view of the servers a request may go to: a Balancer
// (upstream/balancer.h) over them and a ConnectionPool to each, made on
// that loop's thread. A FastCGI block is a group of one server; an
// [[upstream]] group of the config is one per loop and group.
//
//   Group group(loop, "backend", servers, Balancer::Method::kRoundRobin, pool_options);
//   auto i = group.pick(key, tried);          // nullopt: none available
//   group.pool(*i).acquire(&user); group.started(*i);
//   ... group.finished(*i, /*failed=*/false, elapsed_ms);
//
// Loop thread only.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/loop_counter.h"

#include "net/connection_pool.h"
#include "net/socket_address.h"
#include "upstream/balancer.h"

namespace tern::net {
class EventLoop;
class SecureContext;
}

namespace tern::upstream {

struct GroupServer {
  ServerSpec spec;
  net::SocketAddress address = net::InetAddress();
  std::shared_ptr<net::SecureContext> secure{};  // TLS to it (tls::ClientContext); null: plain
  int proxy_protocol = 0;  // 1 or 2: its connections begin with that PROXY header (ConnectionPool)
};

// What is counted per server of a group on one loop (metrics), written by
// that loop and read by any thread.
struct ServerCounters {
  LoopCounter requests;    // attempts that ended
  LoopCounter failures;    // of those, the failed ones
  LoopCounter latency_ms;  // their time from taking the server to the end, summed
  // Out of the rotation until then (steady clock, ms): passive health.
  std::atomic<int64_t> down_until_ms{0};
  // The active check's verdict as this loop last read it: (steady ms << 1)
  // | 1 when down; 0: none read (no check, or no pick yet). The latest
  // reading over the loops is the verdict.
  std::atomic<int64_t> check{0};
};

class Group {
 public:
  // `pool` holds the options every server's pool shares (its address and
  // name are the server's).
  Group(net::EventLoop* loop, std::string name, const std::vector<GroupServer>& servers,
        Balancer::Method method, const net::ConnectionPoolOptions& pool);
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  // The server for an attempt, skipping those whose bit is set in `tried`.
  std::optional<size_t> pick(std::string_view key, uint64_t tried);
  net::ConnectionPool& pool(size_t server) { return *pools_[server]; }
  // An attempt went to `server` / is over: `failed` counts against its
  // passive health, else clears it.
  void started(size_t server) { balancer_.started(server); }
  void finished(size_t server, bool failed, uint64_t elapsed_ms = 0);
  // Where finished() counts, one per server (not owned; they outlive the
  // group); none: nothing is counted.
  void set_counters(std::vector<ServerCounters*> counters);
  // Active health checks: the verdicts of a HealthCheck (one per server,
  // outliving the group), read at each pick.
  // `keep` holds what `up` is part of (a HealthCheck) while the group lives.
  void watch(const std::atomic<bool>* up, std::shared_ptr<const void> keep = nullptr) {
    up_ = up;
    keep_ = std::move(keep);
  }
  // The Calls that use the group (a retired group goes once it has none).
  void attach() { ++calls_; }
  void detach() { --calls_; }
  size_t calls() const { return calls_; }

  // As ConnectionPool's, for every pool.
  void close();
  void retire();

  size_t size() const { return pools_.size(); }
  const std::string& name() const { return name_; }
  // "backend 10.0.0.1:8080", for log lines.
  const std::string& server_name(size_t server) const { return pools_[server]->options().name; }
  const Balancer& balancer() const { return balancer_; }

 private:
  net::EventLoop* loop_;
  std::string name_;
  Balancer balancer_;
  std::vector<std::unique_ptr<net::ConnectionPool>> pools_;
  const std::atomic<bool>* up_ = nullptr;
  std::shared_ptr<const void> keep_;
  std::vector<ServerCounters*> counters_;
  size_t calls_ = 0;
};

}  // namespace tern::upstream
