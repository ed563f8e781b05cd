// A location with `metrics`: the server's figures (server/observability/metrics.h) as
// Prometheus text ("prometheus"), or the status page ("status": the HTML
// page, and with ?format=json the JSON it polls). Answered from the head,
// to GET and HEAD (405 otherwise), never cached by the client. Who may ask
// is the location's business: allow / deny run before this handler.
#pragma once

#include "server/handler.h"

namespace tern::server {

class Metrics;

class MetricsHandler final : public Handler {
 public:
  enum class Kind : uint8_t { kPrometheus, kStatus };
  MetricsHandler(const Metrics* metrics, Kind kind) : metrics_(metrics), kind_(kind) {}
  Claim claim(Route&) override { return Claim::kRespond; }
  void respond(const Route& route, http::ResponseWriter& writer) override;

 private:
  const Metrics* metrics_;
  Kind kind_;
};

}  // namespace tern::server
