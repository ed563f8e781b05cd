// LimitHandler: a location's [[limit]]s, first on its chain (before
// allow/deny, as nginx's limit_req runs before its access phase). Each
// limit's key is made from the request (handlers/location_handlers.h's
// variables; an empty key is not limited) and counted in the limit's
// table. A request over a limit is answered with the limit's status (429)
// and a Retry-After; one that must wait its turn is taken as an exchange,
// its body held, and handed back to the chain when its time comes
// (ChainLoop::resume), the limits not counted again. A client that leaves
// meanwhile takes its timer with it.
//
// A limit of `connections` that a location names counts its requests in
// flight per key (nginx's limit_conn in a location): such a request is
// taken as an exchange, takes a place under each of those limits (503, the
// limit's status, where one is full) and holds them until the exchange
// ends: its response written whole (a file's sending is not waited for),
// or the client gone. An internal redirect is not counted again.
#pragma once

#include <memory>
#include <vector>

#include "server/config/config.h"
#include "server/handler.h"
#include "server/limits/key_limits.h"

namespace tern::server {

class Chain;

class LimitHandler final : public Handler {
 public:
  // `chain` answers the requests that waited (it outlives them: each
  // exchange keeps it).
  LimitHandler(std::shared_ptr<const KeyLimits> limits, const LocationConfig& location, const Chain* chain);
  Claim claim(Route& route) override;
  void respond(const Route& route, http::ResponseWriter& writer) override;
  void start(const Route& route, http::Exchange& exchange) override;

 private:
  // Takes the request's places under in_flight_, held by the exchange;
  // false (the exchange answered, its status) where a limit is full.
  bool take_places(const Route& route, http::Exchange& exchange) const;

  std::vector<const KeyLimits::Limit*> limits_;     // with a rate
  std::vector<const KeyLimits::Limit*> in_flight_;  // with connections
  std::shared_ptr<const KeyLimits> all_;  // what the places a request holds are given back to
  const Chain* chain_;
};

}  // namespace tern::server
