// The metrics as they leave the server: Prometheus' text exposition format
// (version 0.0.4), and the JSON the status page polls. Both are made from
// one MetricsSnapshot (server/metrics.h) and carry the same figures.
//
//   # HELP tern_requests_total Responses sent, by site, location and status class.
//   # TYPE tern_requests_total counter
//   tern_requests_total{site="example.com",location="/",class="2xx"} 1027
#pragma once

#include <string>
#include <string_view>

#include "server/observability/metrics.h"

namespace tern::server {

inline constexpr std::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

std::string prometheus_text(const MetricsSnapshot& snapshot, std::string_view version);
std::string status_json(const MetricsSnapshot& snapshot, std::string_view version);

}  // namespace tern::server
