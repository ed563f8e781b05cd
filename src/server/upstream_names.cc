#include "server/upstream_names.h"

#include <algorithm>
#include <stdexcept>

#include "base/log.h"
#include "net/event_loop.h"
#include "upstream/balancer.h"

namespace tern::server {
namespace {

// Answers are asked for again within these bounds whatever their TTL: a
// TTL of 0 would ask in a loop, a day-long one would miss a move.
constexpr std::chrono::seconds kMinRefresh{1};
constexpr std::chrono::seconds kMaxRefresh{3600};
// A name that fails is asked again this soon (its last addresses serve).
constexpr std::chrono::seconds kRetry{5};

std::string joined(const std::vector<net::InetAddress>& addresses) {
  std::string out;
  for (const net::InetAddress& address : addresses) out += (out.empty() ? "" : ", ") + address.to_ip();
  return out.empty() ? "none" : out;
}

}  // namespace

UpstreamNames::UpstreamNames(std::vector<UpstreamConfig> groups, const Config& config)
    : groups_(std::move(groups)), servers_(config.resolver), interval_(config.resolve_interval) {
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (size_t s = 0; s < groups_[g].servers.size(); ++s) {
      const UpstreamServerConfig& server = groups_[g].servers[s];
      if (server.host.empty()) continue;
      auto entry = std::make_unique<Entry>();
      entry->group = g;
      entry->server = s;
      entry->host = server.host;
      entry->port = server.port;
      entries_.push_back(std::move(entry));
    }
  }
}

UpstreamNames::~UpstreamNames() { stop(); }

bool UpstreamNames::named(size_t group) const {
  return std::any_of(entries_.begin(), entries_.end(), [group](const auto& e) { return e->group == group; });
}

void UpstreamNames::start(net::EventLoop* loop, std::function<void(size_t group)> changed) {
  if (entries_.empty()) return;
  loop_ = loop;
  changed_ = std::move(changed);
  auto made = net::DnsResolver::make(loop, {.servers = servers_});
  if (!made) throw std::runtime_error("resolver: " + made.error().message());
  resolver_ = std::move(*made);
  for (auto& entry : entries_) ask(*entry);
}

void UpstreamNames::stop() {
  if (loop_ == nullptr) return;
  for (auto& entry : entries_) {
    if (entry->timer.valid()) loop_->cancel(entry->timer);
    entry->timer = net::TimerId{};
  }
  resolver_.reset();  // drops the answers still to come
  loop_ = nullptr;
}

void UpstreamNames::ask(Entry& entry) {
  entry.timer = net::TimerId{};
  resolver_->resolve(entry.host, entry.port,
                     [this, &entry](net::DnsResolver::Answer answer) { answered(entry, std::move(answer)); });
}

void UpstreamNames::answered(Entry& entry, net::DnsResolver::Answer answer) {
  if (loop_ == nullptr) return;
  const std::string& group = groups_[entry.group].name;
  std::chrono::milliseconds next = kRetry;
  bool changed = false;
  if (!answer.ok()) {
    std::lock_guard lock(mu_);
    if (!entry.failing) {
      TERN_LOG_WARN("upstream {}: {} does not resolve ({}); keeping its last addresses: {}", group, entry.host,
                    answer.error, joined(entry.addresses));
    }
    entry.failing = true;
  } else {
    next = interval_.count() > 0 ? interval_
                                 : std::chrono::milliseconds(std::clamp(answer.ttl, kMinRefresh, kMaxRefresh));
    std::lock_guard lock(mu_);
    if (entry.failing) TERN_LOG_INFO("upstream {}: {} resolves again", group, entry.host);
    entry.failing = false;
    if (answer.addresses != entry.addresses) {
      TERN_LOG_INFO("upstream {}: {} is now {} (was {})", group, entry.host, joined(answer.addresses),
                    joined(entry.addresses));
      entry.addresses = std::move(answer.addresses);
      changed = true;
    }
  }
  entry.timer = loop_->run_after(next, [this, &entry] { ask(entry); });
  if (changed && changed_) changed_(entry.group);
}

std::vector<UpstreamServerConfig> UpstreamNames::servers(size_t group) const {
  std::vector<UpstreamServerConfig> out;
  std::lock_guard lock(mu_);
  for (size_t s = 0; s < groups_[group].servers.size(); ++s) {
    const UpstreamServerConfig& server = groups_[group].servers[s];
    if (server.host.empty()) {
      out.push_back(server);
      continue;
    }
    for (const auto& entry : entries_) {
      if (entry->group != group || entry->server != s) continue;
      for (const net::InetAddress& address : entry->addresses) {
        UpstreamServerConfig resolved = server;
        resolved.address = address;
        resolved.address_text = address.to_ip_port();
        out.push_back(std::move(resolved));
      }
    }
  }
  return out;
}

UpstreamConfig UpstreamNames::resolved(size_t group) const {
  UpstreamConfig config = groups_[group];
  config.servers = servers(group);
  if (config.servers.size() > upstream::Balancer::kMaxServers) {
    TERN_LOG_EVERY_SECOND(spdlog::level::warn, "upstream {}: its names resolve to {} addresses; the first {} serve",
                          config.name, config.servers.size(), upstream::Balancer::kMaxServers);
    config.servers.resize(upstream::Balancer::kMaxServers);
  }
  return config;
}

}  // namespace tern::server
