// Server's figures for the metrics and the status page: connections and
// bytes, TLS handshakes, limits, cache zones, certificates and dropped log
// records, added to each snapshot the metrics take (observability/).
#include "base/log.h"
#include "server/acme/acme_manager.h"
#include "server/cache_zones.h"
#include "server/chain.h"
#include "server/limits/key_limits.h"
#include "server/observability/metrics.h"
#include "server/server.h"

namespace tern::server {
namespace {

// Whether a location of the config answers metrics: requests are counted
// by site and location only then.
bool names_metrics(const Config& config) {
  for (const SiteConfig& site : config.sites) {
    for (const LocationConfig& location : site.locations) {
      if (!location.metrics.empty()) return true;
    }
  }
  return false;
}

}  // namespace

void Server::count_by_series(const Config& config) {
  const bool on = names_metrics(config);
  metrics_->set_enabled(on);
  http_->count_connection_phases(on);
}

void Server::add_server_figures(MetricsSnapshot* snapshot) const {
  const net::TcpServer::Totals totals = http_->tcp_server().totals();
  const http::HttpServer::ConnectionStates states = http_->connection_states();
  MetricsSnapshot::Connections& c = snapshot->connections;
  c.active = http_->tcp_server().connection_count();
  c.reading = states.reading;
  c.writing = states.writing;
  c.idle = states.idle;
  c.accepted = totals.accepted;
  c.shed = totals.shed;
  snapshot->bytes_received = totals.bytes_received;
  snapshot->bytes_sent = totals.bytes_sent;
  {
    std::lock_guard lock(acme_mu_);
    if (acme_ != nullptr) {
      for (AcmeCertificateStatus& cert : acme_->status()) {
        snapshot->certificates.push_back(
            {std::move(cert.names), cert.not_after, cert.self_signed, std::move(cert.last_result), cert.last_attempt,
             cert.last_issued});
      }
    }
  }
  const tls::Stats tls = tls_totals();
  snapshot->tls.handshakes = tls.handshakes;
  snapshot->tls.resumed = tls.resumed;
  snapshot->tls.failed = tls.failed;
  snapshot->tls.kernel = tls.kernel;
  std::shared_ptr<const KeyLimits> limits;
  {
    std::lock_guard lock(limits_mu_);
    limits = key_limits_;
  }
  if (limits != nullptr) {
    for (const KeyLimits::Limit& l : limits->limits()) {
      MetricsSnapshot::Limit& out = snapshot->limits.emplace_back();
      out.name = l.config.name;
      if (l.rate) {
        out.kind = "rate";
        out.delayed = l.rate->counts().delayed;
        out.refused = l.rate->counts().refused;
        out.keys = l.rate->keys();
      } else {
        out.kind = "connections";
        out.refused = l.connections->refused();
        out.keys = l.connections->keys();
      }
    }
  }
  if (caches_ != nullptr) {
    for (const auto& zone : caches_->zones()) {
      const cache::Zone::Counts counts = zone->counts();
      snapshot->cache_zones.push_back({zone->options().name, counts.entries, counts.disk_bytes, counts.memory_bytes,
                                       zone->options().max_size, zone->options().memory});
    }
  }
  snapshot->error_log_dropped = log::dropped_records();
  snapshot->access_log_dropped = access_log_.dropped();
}

}  // namespace tern::server
