#include "server/upstreams.h"

#include <string>

#include "server/handlers/fastcgi_handler.h"
#include "server/handlers/proxy_handler.h"
#include "server/sites.h"

namespace tern::server {
namespace {

template <typename T>
bool same_lists(std::vector<T> a, std::vector<T> b) {
  for (T& item : a) item.line = 0;
  for (T& item : b) item.line = 0;
  return a == b;
}

}  // namespace

Upstreams::Upstreams(const Config& config) {
  if (std::vector<FastCgiConfig> blocks = fastcgi_blocks(config); !blocks.empty()) {
    fastcgi = std::make_unique<FastCgiRoutes>(config, blocks, std::string("tern/") + TERN_VERSION);
  }
  if (!proxy_groups(config).empty()) proxy = std::make_unique<ProxyRoutes>(config);
}

Upstreams::~Upstreams() = default;

void Upstreams::init_loop(net::EventLoop* loop) {
  if (fastcgi) fastcgi->init_loop(loop);
  if (proxy) proxy->init_loop(loop);
}

void Upstreams::start_health_checks(net::EventLoop* loop) {
  if (proxy) proxy->start_health_checks(loop);
}

void Upstreams::stop_health_checks() {
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
  return same_lists(fastcgi_blocks(a), fastcgi_blocks(b)) && same_lists(proxy_groups(a), proxy_groups(b));
}

}  // namespace tern::server
