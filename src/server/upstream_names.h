// UpstreamNames: the servers of upstream groups given by name
// (servers = [{ address = "app:3000" }]), resolved on the main loop with
// net::DnsResolver and asked again when the answer's TTL runs out (or
// every `resolve_interval`). Every address of a name is a server of its
// group, with that entry's weight and settings. A name that stops
// resolving keeps its last addresses (a warning says so) and is asked again
// within seconds; one that never resolved gives its group no server (its
// requests get 502) until it does. Requests never wait on DNS: the groups
// are rebuilt from the new addresses and swapped in on each loop (the
// owner's `changed` callback), the old ones finishing what they began.
//
// servers() may be called from any thread; the rest on the main loop.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/dns_resolver.h"
#include "net/timer_wheel.h"
#include "server/config/config.h"

namespace tern::net {
class EventLoop;
}

namespace tern::server {

class UpstreamNames {
 public:
  // `groups`: the groups, as the owner numbers them.
  UpstreamNames(std::vector<UpstreamConfig> groups, const Config& config);
  ~UpstreamNames();
  UpstreamNames(const UpstreamNames&) = delete;
  UpstreamNames& operator=(const UpstreamNames&) = delete;

  // Whether a group has a server given by name.
  bool named(size_t group) const;
  bool any() const { return !entries_.empty(); }

  // Asks for every name now, and again as answers expire; `changed(group)`
  // runs on `loop` after an answer changed the group's addresses. Throws
  // std::runtime_error when the resolver cannot start (a bad server).
  void start(net::EventLoop* loop, std::function<void(size_t group)> changed);
  void stop();

  // The group's servers by address: each entry given by name becomes one
  // per address it last resolved to (none yet: none). Any thread.
  std::vector<UpstreamServerConfig> servers(size_t group) const;
  // The group's config with those servers, as many as a group can balance
  // (the rest left out with a warning). Any thread.
  UpstreamConfig resolved(size_t group) const;

 private:
  struct Entry {
    size_t group = 0;
    size_t server = 0;  // in the group's config
    std::string host;
    uint16_t port = 0;
    std::vector<net::InetAddress> addresses;  // guarded by mu_
    net::TimerId timer;
    bool failing = false;  // the last ask failed (warned once until it answers)
  };

  void ask(Entry& entry);
  void answered(Entry& entry, net::DnsResolver::Answer answer);

  const std::vector<UpstreamConfig> groups_;
  const std::vector<std::string> servers_;  // the DNS servers; empty: the system's
  const std::chrono::milliseconds interval_;
  std::vector<std::unique_ptr<Entry>> entries_;
  net::EventLoop* loop_ = nullptr;
  std::unique_ptr<net::DnsResolver> resolver_;
  std::function<void(size_t)> changed_;
  mutable std::mutex mu_;  // the entries' addresses
};

}  // namespace tern::server
