// The reverse proxy on the chain: a location with `proxy` hands every
// request to an upstream HTTP/1.1 server through an upstream::Call with a
// proxy::HttpCodec.
//
// ProxyRoutes holds the groups: each [[upstream]] of the config, and one
// group of one server per address a proxy names directly ("http://
// 127.0.0.1:3000"); a group passed to over "https://" is one more, with a
// tls::ClientContext per server (verification, SNI, sessions resumed). Each loop has its own upstream::Group per group (a
// balancer and a pool per server: counts and connections are the loop's,
// no locks), created by init_loop() on that loop's thread and closed by
// shutdown(); a reload that changes them builds new ones and retires the
// old behind the requests that began under them, as for FastCGI blocks.
// A group's active health check runs once per process, on the main loop,
// and so do the lookups of servers given by name (UpstreamNames): when a
// name's addresses change, each loop's group is rebuilt with them and
// swapped in, the old one kept until the requests that use it are over.
//
// ProxyHandler is one location's proxy: the request target (the client's
// as sent, or with the location's prefix replaced by the path of `pass`),
// the key a hashing group places the request by, the Host, and the
// options of the Call.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "proxy/forward_head.h"
#include "server/config/config.h"
#include "server/handler.h"
#include "server/handlers/upstream_cache.h"
#include "server/loop_groups.h"
#include "server/upstream_names.h"
#include "upstream/group.h"
#include "upstream/health_check.h"

namespace tern::net {
class EventLoop;
class SecureContext;
}

namespace tern::server {

class CacheZones;
class Chain;
class Metrics;
struct Location;

// Every group the config's proxies and auth_forward checks use (the
// location's check first, then its proxy), [[upstream]] ones first, then those
// passed to over TLS, then one per address named directly (in the order
// first named). Two configs with equal lists can share their groups.
std::vector<UpstreamConfig> proxy_groups(const Config& config);

// nginx's $proxy_host: the group's name or the address a proxy passes to
// ("localhost" for a Unix socket), the Host of a request that names none.
std::string_view proxy_host(const ProxyConfig& proxy);

class ProxyRoutes {
 public:
  explicit ProxyRoutes(const Config& config);
  ~ProxyRoutes();
  ProxyRoutes(const ProxyRoutes&) = delete;
  ProxyRoutes& operator=(const ProxyRoutes&) = delete;

  bool empty() const { return groups_.empty(); }
  // On each I/O loop's thread, before it serves.
  void init_loop(net::EventLoop* loop);
  // Where the pools count (null: nowhere). Before the first init_loop().
  void set_metrics(Metrics* metrics) { metrics_ = metrics; }
  Metrics* metrics() const { return metrics_; }
  // The [[cache]] zones the proxies' caches name (null: none). Before the
  // handlers are made.
  void set_caches(const CacheZones* caches) { caches_ = caches; }
  const CacheZones* caches() const { return caches_; }
  // Closes the pools, each on its loop's thread (waits). Main thread, while
  // the I/O loops still run.
  void shutdown(const std::vector<net::EventLoop*>& loops);
  // A reload replaced these groups: this loop's pools wind down. On the
  // loop's thread.
  void retire_loop(net::EventLoop* loop);
  // The active health checks of the groups that have them, and the lookups
  // of servers given by name, on `loop` (the main one), before any
  // init_loop(); stopped on that loop's thread.
  void start_health_checks(net::EventLoop* loop);
  void stop_health_checks();

  // The group a proxy names (its index); -1 if none (the config checks).
  int find(const ProxyConfig& proxy) const;
  // This loop's instance of group `index`; null on a loop without one.
  upstream::Group* group(size_t index) const;
  const UpstreamConfig& config(size_t index) const { return groups_[index]; }
  const std::string& temp_dir() const { return temp_dir_; }

 private:
  // What the loops make group `index` from: its servers, and the check that
  // judges those very servers (its verdicts are by their positions).
  struct Generation {
    std::vector<upstream::GroupServer> servers;
    std::shared_ptr<upstream::HealthCheck> health;
  };

  // Group `index`'s servers, each with its TLS context if it has one.
  std::vector<upstream::GroupServer> servers(size_t index) const;
  // The generation of group `index` now: its servers, and a new check
  // (started on the main loop) if it has one.
  Generation generation(size_t index) const;
  // Group `index` for `loop`, from its current generation.
  std::unique_ptr<upstream::Group> make_group(net::EventLoop* loop, size_t index) const;
  // Main loop: a name of group `index` moved; every loop gets a new group.
  void names_changed(size_t index);

  std::vector<UpstreamConfig> groups_;
  Metrics* metrics_ = nullptr;
  const CacheZones* caches_ = nullptr;
  std::vector<UpstreamConfig> declared_;  // the [[upstream]]s
  // Per group, a TLS context per server (none for a plain group), shared by
  // every loop's pools and the health check.
  std::vector<std::vector<std::shared_ptr<net::SecureContext>>> secure_;
  std::string temp_dir_;
  // One per group (null without checks); the loops' groups read their
  // verdicts and hold them. Replaced when a name moves: the old ones stop
  // and go (on the main loop) once no loop's group holds them.
  std::vector<Generation> current_;  // guarded by mu_; empty until start_health_checks()
  std::vector<std::shared_ptr<upstream::HealthCheck>> stopped_health_;
  net::EventLoop* main_loop_ = nullptr;
  std::unique_ptr<UpstreamNames> names_;
  mutable std::mutex mu_;
  LoopGroups loops_;
};

class ProxyHandler final : public Handler {
 public:
  // `chain` answers the upstream's X-Accel-Redirects. Throws
  // std::runtime_error when the location's cache names a zone the server
  // does not have (one a reload added: a restart makes it).
  ProxyHandler(const ProxyRoutes* routes, const Location& location, const Chain* chain);
  Claim claim(Route&) override { return Claim::kExchange; }
  void start(const Route& route, http::Exchange& exchange) override;

 private:
  std::string hash_key(const Route& route) const;

  const ProxyRoutes* routes_;
  const Chain* chain_;
  const ProxyConfig config_;
  const int group_;
  std::string prefix_;  // the location's, replaced by config_.path
  std::string hash_;    // the group's hash key, for a hashing group
  bool proxy_protocol_ = false;  // the group's connections name their client
  std::string log_name_;
  std::string rewrite_from_;
  proxy::FieldEdits edits_;  // the location's set_headers and remove_headers
  std::unique_ptr<UpstreamCache> cache_;  // null without one
};

}  // namespace tern::server
