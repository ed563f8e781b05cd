// HealthCheck: active health checks of an upstream group's servers. Every
// `interval` each server gets a GET of `path` on a fresh connection
// ("Connection: close"); a status within [status_min, status_max] before
// `timeout` passes is a pass, anything else (refused, timed out, closed, a
// bad response, another status) a failure. `fall` failures in a row mark a
// server down and `rise` passes in a row mark it up again, each change in
// one log line. Servers start up.
//
// One per group per process, on one loop (the main one); the verdicts are
// atomics that every loop's Group reads when it picks (Group::watch), so
// the probes do not multiply with the workers.
//
// Constructed anywhere; start(), stop() and destruction on its loop's
// thread (stop() before the loop goes).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "net/connection_pool.h"
#include "net/timer_wheel.h"
#include "upstream/group.h"
#include "upstream/health_options.h"

namespace tern::net {
class EventLoop;
}

namespace tern::upstream {

class HealthCheck {
 public:
  HealthCheck(net::EventLoop* loop, std::string name, const std::vector<GroupServer>& servers,
              HealthOptions options);
  ~HealthCheck();
  HealthCheck(const HealthCheck&) = delete;
  HealthCheck& operator=(const HealthCheck&) = delete;

  void start();
  void stop();
  // One verdict per server, in the group's order.
  const std::atomic<bool>* up() const { return up_.get(); }

 private:
  class Probe;

  net::EventLoop* loop_;
  const std::string name_;
  const HealthOptions options_;
  std::unique_ptr<std::atomic<bool>[]> up_;
  std::vector<std::unique_ptr<Probe>> probes_;
  net::TimerId timer_;
};

}  // namespace tern::upstream
