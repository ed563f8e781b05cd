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
    options.name = servers.size() == 1 ? name_ : name_ + " " + server.address.to_string();
    pools_.push_back(std::make_unique<net::ConnectionPool>(loop_, options));
  }
}

std::optional<size_t> Group::pick(std::string_view key, uint64_t tried) {
  if (up_ != nullptr) {
    for (size_t i = 0; i < pools_.size(); ++i) balancer_.set_up(i, up_[i].load(std::memory_order_relaxed));
  }
  if (pools_.size() == 1) {
    // One server (a FastCGI block): no choice to make, and no passive
    // health either, so that its failures are reported as they happen.
    if ((tried & 1) != 0 || (up_ != nullptr && !up_[0].load(std::memory_order_relaxed))) return std::nullopt;
    return 0;
  }
  return balancer_.pick(key, tried, loop_->clock().now());
}

void Group::finished(size_t server, bool failed) {
  balancer_.finished(server);
  if (failed) {
    balancer_.failed(server, loop_->clock().now());
  } else {
    balancer_.succeeded(server);
  }
}

void Group::close() {
  for (auto& pool : pools_) pool->close();
}

void Group::retire() {
  for (auto& pool : pools_) pool->retire();
}

}  // namespace tern::upstream
