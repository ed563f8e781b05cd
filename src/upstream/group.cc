#include "upstream/group.h"

#include "net/event_loop.h"

namespace tern::upstream {
namespace {

std::vector<ServerSpec> specs_of(const std::vector<GroupServer>& servers) {
  std::vector<ServerSpec> specs;
  specs.reserve(servers.size());
  for (const GroupServer& server : servers) specs.push_back(server.spec);
  return specs;
}

}  // namespace

Group::Group(net::EventLoop* loop, std::string name, const std::vector<GroupServer>& servers,
             Balancer::Method method, const net::ConnectionPoolOptions& pool)
    : loop_(loop), name_(std::move(name)), balancer_(specs_of(servers), method) {
  for (const GroupServer& server : servers) {
    net::ConnectionPoolOptions options = pool;
    options.address = server.address;
    options.secure = server.secure;
    options.proxy_protocol = server.proxy_protocol;
    options.name = servers.size() == 1 ? name_ : name_ + " " + server.address.to_string();
    pools_.push_back(std::make_unique<net::ConnectionPool>(loop_, options));
  }
}

std::optional<size_t> Group::pick(std::string_view key, uint64_t tried) {
  if (up_ != nullptr) {
    for (size_t i = 0; i < pools_.size(); ++i) {
      const bool up = up_[i].load(std::memory_order_relaxed);
      balancer_.set_up(i, up);
      if (!counters_.empty()) {
        const auto now_ms = static_cast<int64_t>(loop_->clock().now_ms());
        counters_[i]->check.store((now_ms << 1) | (up ? 0 : 1), std::memory_order_relaxed);
      }
    }
  }
  if (pools_.empty()) return std::nullopt;  // a name that has not resolved yet
  if (pools_.size() == 1) {
    // One server (a FastCGI block): no choice to make, and no passive
    // health either, so that its failures are reported as they happen.
    if ((tried & 1) != 0 || (up_ != nullptr && !up_[0].load(std::memory_order_relaxed))) return std::nullopt;
    return 0;
  }
  return balancer_.pick(key, tried, loop_->clock().now());
}

void Group::finished(size_t server, bool failed, uint64_t elapsed_ms) {
  balancer_.finished(server);
  if (failed) {
    balancer_.failed(server, loop_->clock().now());
  } else {
    balancer_.succeeded(server);
  }
  if (counters_.empty()) return;
  ServerCounters& counters = *counters_[server];
  counters.requests.add();
  if (failed) counters.failures.add();
  counters.latency_ms.add(elapsed_ms);
  // A group of one never takes its server out (pick()).
  const int64_t down_until =
      pools_.size() == 1 ? 0 : static_cast<int64_t>(CachedClock::to_ms(balancer_.down_until(server)));
  counters.down_until_ms.store(down_until, std::memory_order_relaxed);
}

void Group::set_counters(std::vector<ServerCounters*> counters) {
  counters_ = std::move(counters);
  // A verdict an earlier group (before a reload) left is not this one's.
  for (ServerCounters* c : counters_) c->check.store(0, std::memory_order_relaxed);
}

void Group::close() {
  for (auto& pool : pools_) pool->close();
}

void Group::retire() {
  for (auto& pool : pools_) pool->retire();
}

}  // namespace tern::upstream
