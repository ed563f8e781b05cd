// KeyLimits: a configuration's [[limit]]s, one table each (RateLimit for a
// rate, ConcurrencyLimit for connections), shared by every loop. A reload
// makes new KeyLimits from the running ones: a limit of the same name,
// kind and size keeps its table (its keys, their counts and its figures),
// so that SIGHUP is no way around a limit.
//
// ConnectionLimits: the top level's limit_connections, the gate every new
// connection passes (net::ConnectionGate): a client address holding its
// `connections` already has the next one closed at accept.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "net/connection_gate.h"
#include "server/config/config.h"
#include "server/handlers/variable_text.h"
#include "server/limits/concurrency_limit.h"
#include "server/limits/rate_limit.h"

namespace tern::server {

class KeyLimits {
 public:
  struct Limit {
    KeyLimitConfig config;
    VariableText key;  // config.key, read
    std::unique_ptr<RateLimit> rate;                // with a rate
    std::unique_ptr<ConcurrencyLimit> connections;  // with connections
  };

  // `previous`: the running limits, whose tables those of the same name,
  // kind and size keep; may be null.
  KeyLimits(const std::vector<KeyLimitConfig>& configs, const KeyLimits* previous);
  KeyLimits(const KeyLimits&) = delete;
  KeyLimits& operator=(const KeyLimits&) = delete;

  // The limit named `name`; null if none.
  const Limit* find(std::string_view name) const;
  const std::vector<Limit>& limits() const { return limits_; }

 private:
  std::vector<Limit> limits_;
};

class ConnectionLimits final : public net::ConnectionGate {
 public:
  // The limits of `names` (limits of connections) in `limits`, which the
  // gate keeps: a connection let in leaves the tables it entered.
  ConnectionLimits(std::shared_ptr<const KeyLimits> limits, const std::vector<std::string>& names);

  bool enter(const net::InetAddress& client) override;
  void leave(const net::InetAddress& client) override;

 private:
  std::shared_ptr<const KeyLimits> keep_;
  std::vector<const KeyLimits::Limit*> limits_;
};

}  // namespace tern::server
