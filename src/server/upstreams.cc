#include "server/upstreams.h"

#include <algorithm>
#include <latch>
#include <string>

#include "net/event_loop.h"
#include "server/handlers/fastcgi_handler.h"
#include "server/handlers/proxy_handler.h"
#include "server/sites.h"

namespace tern::server {
namespace {

template <typename T>
bool same_lists(std::vector<T> a, std::vector<T> b) {
  for (std::vector<T>* list : {&a, &b}) {
    for (T& item : *list) {
      item.line = 0;
      if constexpr (requires { item.pass_line; }) item.pass_line = 0;
    }
  }
  return a == b;
}

}  // namespace

void run_on_loop_and_wait(net::EventLoop* loop, const std::vector<net::EventLoop*>& running,
                          const std::function<void()>& f) {
  if (loop->is_in_loop_thread()) return f();
  if (std::find(running.begin(), running.end(), loop) == running.end()) return;
  std::latch done(1);
  loop->run_in_loop([&] {
    f();
    done.count_down();
  });
  done.wait();
}

std::vector<upstream::GroupServer> group_servers(const UpstreamConfig& config) {
  std::vector<upstream::GroupServer> servers;
  for (const UpstreamServerConfig& s : config.servers) {
    upstream::GroupServer server;
    server.address = s.address;
    server.spec.address = s.address_text;
    server.spec.weight = s.weight;
    server.spec.backup = s.backup;
    server.spec.max_fails = s.max_fails;
    server.spec.fail_timeout = s.fail_timeout;
    server.proxy_protocol = config.proxy_protocol;
    servers.push_back(std::move(server));
  }
  return servers;
}

upstream::Balancer::Method group_method(UpstreamConfig::Method method) {
  switch (method) {
    case UpstreamConfig::Method::kRoundRobin: return upstream::Balancer::Method::kRoundRobin;
    case UpstreamConfig::Method::kLeastConnections: return upstream::Balancer::Method::kLeastConnections;
    case UpstreamConfig::Method::kHash: return upstream::Balancer::Method::kHash;
  }
  return upstream::Balancer::Method::kRoundRobin;
}

Upstreams::Upstreams(const Config& config, Metrics* metrics, const CacheZones* caches) {
  if (std::vector<FastCgiConfig> blocks = fastcgi_blocks(config); !blocks.empty()) {
    fastcgi = std::make_unique<FastCgiRoutes>(config, blocks, std::string("tern/") + TERN_VERSION, caches, metrics);
  }
  if (!proxy_groups(config).empty()) {
    proxy = std::make_unique<ProxyRoutes>(config);
    proxy->set_metrics(metrics);
    proxy->set_caches(caches);
  }
}

Upstreams::~Upstreams() = default;

void Upstreams::init_loop(net::EventLoop* loop) {
  if (fastcgi) fastcgi->init_loop(loop);
  if (proxy) proxy->init_loop(loop);
}

void Upstreams::start_health_checks(net::EventLoop* loop) {
  if (fastcgi) fastcgi->start_names(loop);
  if (proxy) proxy->start_health_checks(loop);
}

void Upstreams::stop_health_checks() {
  if (fastcgi) fastcgi->stop_names();
  if (proxy) proxy->stop_health_checks();
}

void Upstreams::shutdown(const std::vector<net::EventLoop*>& loops) {
  if (fastcgi) fastcgi->shutdown(loops);
  if (proxy) proxy->shutdown(loops);
}

void Upstreams::retire_loop(net::EventLoop* loop) {
  if (fastcgi) fastcgi->retire_loop(loop);
  if (proxy) proxy->retire_loop(loop);
}

bool Upstreams::same(const Config& a, const Config& b) {
  // Groups over TLS are made again: their CA and certificate files may have
  // been renewed under the same names.
  const std::vector<UpstreamConfig> groups = proxy_groups(b);
  const bool tls = std::any_of(groups.begin(), groups.end(), [](const UpstreamConfig& g) { return g.tls.has_value(); });
  return !tls && same_lists(fastcgi_blocks(a), fastcgi_blocks(b)) && same_lists(proxy_groups(a), groups);
}

}  // namespace tern::server
