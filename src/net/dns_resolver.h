// DnsResolver: names to addresses without blocking a loop, on c-ares
// (Debian libc-ares-dev): its sockets are watched by the loop's poller
// like any other, its timeouts by a loop timer.
//
//   DnsResolver resolver(&loop, {.servers = {"10.0.0.2"}});
//   resolver.resolve("app", 3000, [](DnsResolver::Answer answer) {
//     if (answer.ok()) use(answer.addresses);  // sorted, each with port 3000
//     // answer.ttl: how long they may be kept
//   });
//
// Without servers, /etc/resolv.conf and /etc/hosts decide, as for any
// program of the host. A name that is an address answers at once (after
// the round). Every answer comes on the loop, after resolve() returned;
// none after the resolver is destroyed (pending ones are dropped).
//
// Loop thread only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "net/inet_address.h"

namespace tern::net {

class EventLoop;

// Where and how a DnsResolver asks.
struct DnsResolverOptions {
  // "10.0.0.2", "127.0.0.1:5353", "[2001:db8::53]:53"; empty: the
  // system's (/etc/resolv.conf).
  std::vector<std::string> servers;
  std::chrono::milliseconds timeout{2000};  // per try
  int tries = 2;  // tries of each server before a lookup fails
};

class DnsResolver {
 public:
  // What a name resolved to, or why it did not.
  struct Answer {
    std::vector<InetAddress> addresses;  // IPv4 and IPv6, sorted, without duplicates
    std::chrono::seconds ttl{0};          // the smallest of the records'
    std::string error;                   // empty when the name resolved
    bool ok() const { return error.empty(); }  // the name resolved
  };
  using Callback = std::function<void(Answer)>;  // takes the answer, on the resolver's loop

  // Fails when c-ares cannot start, or a server is not an address.
  static Result<std::unique_ptr<DnsResolver>> make(EventLoop* loop, DnsResolverOptions options = {});

  ~DnsResolver();
  DnsResolver(const DnsResolver&) = delete;
  DnsResolver& operator=(const DnsResolver&) = delete;

  // Looks `name` up (A and AAAA); `done` gets the addresses with `port`.
  // Loop thread only.
  void resolve(const std::string& name, uint16_t port, Callback done);

 private:
  struct State;
  explicit DnsResolver(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tern::net
