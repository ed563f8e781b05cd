// Upstreams: what the chain's application handlers relay to, the FastCGI
// blocks (handlers/fastcgi_handler.h) and the proxy groups
// (handlers/proxy_handler.h), each with a pool per loop and server. Built
// for a config on the main thread; a reload that changes either builds new
// ones and retires these behind the requests that began under them.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "server/config/config.h"
#include "upstream/group.h"

namespace tern::net {
class EventLoop;
}

namespace tern::server {

class CacheZones;
class FastCgiRoutes;
class Metrics;
class ProxyRoutes;

// Runs f on `loop`'s thread and waits for it (main thread, shutting the
// pools down); nothing if `loop` is not among `running` any more, at once
// if this is its thread.
void run_on_loop_and_wait(net::EventLoop* loop, const std::vector<net::EventLoop*>& running,
                          const std::function<void()>& f);

// An [[upstream]]'s servers and method, as its Groups take them.
std::vector<upstream::GroupServer> group_servers(const UpstreamConfig& config);
upstream::Balancer::Method group_method(UpstreamConfig::Method method);

struct Upstreams {
  std::unique_ptr<FastCgiRoutes> fastcgi;  // null without FastCGI blocks
  std::unique_ptr<ProxyRoutes> proxy;      // null without proxies

  // Throws std::runtime_error when a FastCGI block's root cannot be
  // opened, or a cache names no zone of `caches`. The pools count into
  // `metrics` (null: not counted).
  explicit Upstreams(const Config& config, Metrics* metrics = nullptr, const CacheZones* caches = nullptr);
  ~Upstreams();
  Upstreams(const Upstreams&) = delete;
  Upstreams& operator=(const Upstreams&) = delete;

  // As FastCgiRoutes' and ProxyRoutes'.
  void init_loop(net::EventLoop* loop);
  void shutdown(const std::vector<net::EventLoop*>& loops);
  void retire_loop(net::EventLoop* loop);
  // The proxy groups' active health checks and the lookups of servers given
  // by name, on `loop` (the main one): begun before the first init_loop(),
  // ended when these are replaced or closed.
  void start_health_checks(net::EventLoop* loop);
  void stop_health_checks();

  // Whether two configs name the same blocks and groups (lines aside) and
  // no group speaks TLS: a reload keeps the running Upstreams then.
  static bool same(const Config& a, const Config& b);
};

}  // namespace tern::server
