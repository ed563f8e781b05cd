// HealthOptions: how HealthCheck (upstream/health_check.h) probes a
// group's servers; also what the config's [[upstream]] health table holds.
#pragma once

#include <chrono>
#include <string>

namespace tern::upstream {

struct HealthOptions {
  std::string path = "/health";
  std::string host;  // the Host sent; empty: the server's address
  std::chrono::milliseconds interval{5000};
  std::chrono::milliseconds timeout{2000};
  int status_min = 200;  // a pass is a status in [status_min, status_max]
  int status_max = 399;
  unsigned rise = 2;  // passes in a row that mark a server up
  unsigned fall = 3;  // failures in a row that mark it down
  bool operator==(const HealthOptions&) const = default;
};

}  // namespace tern::upstream
