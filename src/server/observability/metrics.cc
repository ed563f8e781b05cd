#include "server/observability/metrics.h"

#include <algorithm>
#include <chrono>

#include "base/log.h"
#include "http/request.h"
#include "net/event_loop.h"
#include "server/config/config.h"

namespace tern::server {
namespace {

constexpr size_t kRequestSeriesMax = SlotTable<LoopMetrics::Requests>::kCapacity;
constexpr size_t kUpstreamSeriesMax = SlotTable<upstream::ServerCounters>::kCapacity;

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

size_t duration_bucket(uint64_t ms) {
  const auto* at = std::lower_bound(kDurationBoundsMs.begin(), kDurationBoundsMs.end(), static_cast<double>(ms));
  return static_cast<size_t>(at - kDurationBoundsMs.begin());
}

}  // namespace

uint64_t MetricsSnapshot::requests_total() const {
  uint64_t total = 0;
  for (const Requests& series : requests) {
    for (uint64_t n : series.by_class) total += n;
  }
  return total;
}

Metrics::Metrics() : start_time_(unix_now()) {
  request_labels_.push_back({{"", ""}});  // series 0: no site yet (a malformed request)
  upstream_labels_.push_back({{"", "", ""}});  // series 0: servers past the last series, not shown
}

uint32_t Metrics::intern(std::vector<Labels>& table, std::vector<std::string> values, size_t capacity) {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i].values == values) return static_cast<uint32_t>(i);
  }
  if (table.size() >= capacity) {
    TERN_LOG_WARN("metrics: more than {} series of one kind; the new ones are counted in series 0", capacity);
    return 0;
  }
  table.push_back({std::move(values)});
  return static_cast<uint32_t>(table.size() - 1);
}

uint32_t Metrics::request_series(std::string_view site, std::string_view location) {
  return intern(request_labels_, {std::string(site), std::string(location)}, kRequestSeriesMax);
}

uint32_t Metrics::upstream_series(std::string_view kind, std::string_view group, std::string_view server) {
  return intern(upstream_labels_, {std::string(kind), std::string(group), std::string(server)},
                kUpstreamSeriesMax);
}

LoopMetrics& Metrics::loop(net::EventLoop* loop) {
  if (LoopMetrics* mine = loops_.get(loop)) return *mine;
  return loops_.emplace(loop);
}

void Metrics::count_group(net::EventLoop* loop, std::string_view kind, std::string_view name,
                          upstream::Group& group, const std::vector<upstream::GroupServer>& servers) {
  LoopMetrics& counts = this->loop(loop);
  std::vector<upstream::ServerCounters*> counters;
  for (const upstream::GroupServer& server : servers) {
    counters.push_back(&counts.upstreams.at(upstream_series(kind, name, server.spec.address)));
  }
  group.set_counters(std::move(counters));
}

void Metrics::record(net::EventLoop* loop, const http::Request& request, int status) {
  LoopMetrics& counts = this->loop(loop);
  counts.responses.add();
  if (!enabled()) return;
  const size_t status_class = status >= 100 && status < 600 ? static_cast<size_t>(status / 100 - 1) : 4;
  counts.requests.at(request.tag()).by_class[status_class].add();
  const int64_t received = request.received_ms();
  const int64_t now = static_cast<int64_t>(loop->clock().now_ms());
  const uint64_t elapsed = received > 0 && now > received ? static_cast<uint64_t>(now - received) : 0;
  counts.durations[elapsed == 0 ? 0 : duration_bucket(elapsed)].add();  // most answer within the round
  counts.duration_ms.add(elapsed);
}

uint64_t Metrics::responses() const {
  uint64_t total = 0;
  loops_.for_each([&total](net::EventLoop*, const LoopMetrics& counts) { total += counts.responses.get(); });
  return total;
}

MetricsSnapshot Metrics::snapshot() const {
  MetricsSnapshot s;
  s.start_time = start_time_;
  s.now = unix_now();
  std::vector<Labels> request_labels;
  std::vector<Labels> upstream_labels;
  {
    std::lock_guard lock(mu_);
    request_labels = request_labels_;
    upstream_labels = upstream_labels_;
  }
  std::vector<MetricsSnapshot::Requests> requests(request_labels.size());
  std::vector<MetricsSnapshot::Upstream> upstreams(upstream_labels.size());
  std::vector<int64_t> down_until(upstream_labels.size(), 0);
  std::vector<int64_t> check(upstream_labels.size(), 0);  // the latest verdict (ServerCounters::check)
  std::array<uint64_t, kDurationBuckets> buckets{};
  loops_.for_each([&](net::EventLoop*, const LoopMetrics& counts) {
    for (size_t i = 0; i < requests.size(); ++i) {
      if (const LoopMetrics::Requests* series = counts.requests.find(i)) {
        for (size_t c = 0; c < 5; ++c) requests[i].by_class[c] += series->by_class[c].get();
      }
    }
    for (size_t b = 0; b < kDurationBuckets; ++b) buckets[b] += counts.durations[b].get();
    s.duration_ms += counts.duration_ms.get();
    s.file_cache_hits += counts.file_cache_hits.get();
    s.file_cache_misses += counts.file_cache_misses.get();
    s.response_cache_hits += counts.response_cache_hits.get();
    s.response_cache_misses += counts.response_cache_misses.get();
    s.response_cache_bypass += counts.response_cache_bypass.get();
    s.response_cache_stale += counts.response_cache_stale.get();
    s.response_cache_revalidated += counts.response_cache_revalidated.get();
    for (size_t i = 0; i < upstreams.size(); ++i) {
      if (const upstream::ServerCounters* server = counts.upstreams.find(i)) {
        upstreams[i].requests += server->requests.get();
        upstreams[i].failures += server->failures.get();
        upstreams[i].latency_ms += server->latency_ms.get();
        down_until[i] = std::max(down_until[i], server->down_until_ms.load(std::memory_order_relaxed));
        check[i] = std::max(check[i], server->check.load(std::memory_order_relaxed));
      }
    }
  });
  s.responses = responses();
  uint64_t cumulative = 0;
  for (size_t b = 0; b < kDurationBuckets; ++b) s.duration_buckets[b] = cumulative += buckets[b];
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& by_class = requests[i].by_class;
    if (std::all_of(by_class.begin(), by_class.end(), [](uint64_t n) { return n == 0; })) continue;
    requests[i].site = request_labels[i].values[0];
    requests[i].location = request_labels[i].values[1];
    s.requests.push_back(std::move(requests[i]));
  }
  const int64_t steady_ms = static_cast<int64_t>(CachedClock::to_ms(std::chrono::steady_clock::now()));
  for (size_t i = 1; i < upstreams.size(); ++i) {
    upstreams[i].kind = upstream_labels[i].values[0];
    upstreams[i].group = upstream_labels[i].values[1];
    upstreams[i].server = upstream_labels[i].values[2];
    upstreams[i].up = (check[i] & 1) == 0 && down_until[i] <= steady_ms;
    s.upstreams.push_back(std::move(upstreams[i]));
  }
  if (extra_) extra_(&s);
  return s;
}

std::string site_label(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    if (!name.empty()) return name;
  }
  return "_";
}

std::string location_label(const LocationConfig& location) {
  switch (location.match) {
    case LocationConfig::Match::kExact: return "= " + location.pattern;
    case LocationConfig::Match::kRegex: return "~ " + location.pattern;
    case LocationConfig::Match::kRegexCaseless: return "~* " + location.pattern;
    case LocationConfig::Match::kNamed: return location.pattern;
    case LocationConfig::Match::kPrefix: break;
  }
  return location.skip_regex ? "^~ " + location.pattern : location.pattern;
}

}  // namespace tern::server
