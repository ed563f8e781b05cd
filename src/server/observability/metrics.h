// Metrics: what the web server counts, and the figures a scrape reads.
//
// Every count is kept per loop and written by that loop only (LoopCounter:
// a relaxed load and store, no shared atomic on the request path); a scrape
// sums the loops. What is counted where:
//   - requests by site, location and status class, and the request
//     duration histogram: record(), from the response callback, for the
//     series the chain put on the request (Request::tag);
//   - open-file cache hits (ChainLoop's caches) and response cache hits
//     (FastCGI blocks): LoopMetrics' counters;
//   - each upstream and FastCGI server's attempts, failures, time and
//     health: upstream::ServerCounters, one per loop and server;
//   - connections accepted and shed, bytes on the sockets: the loops' own
//     LoopLoad (net/event_loop.h); connections by phase: HttpServer; TLS
//     handshakes: each address's tls::ServerContext; requests and
//     connections a [[limit]] held or refused: its table (shared by the
//     loops, written only when it holds or refuses); log records dropped:
//     the logs. Those the Server adds to a snapshot (set_extra).
//
// A series is a label set interned once (request_series(),
// upstream_series()) when the sites or upstreams are built, on the main
// thread; a reload that keeps a site and location keeps its series and so
// its counts. Counting starts when the config names a metrics location
// (enabled()); connections, bytes and TLS are counted always.
//
// The figures leave as Prometheus text or the status page's JSON
// (server/metrics_text.h).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/loop_counter.h"
#include "net/loop_local.h"
#include "upstream/group.h"

namespace tern::http {
class Request;
}

namespace tern::server {

struct LocationConfig;

// Upper bounds of the request duration histogram, in milliseconds; one
// more bucket (+Inf) follows.
inline constexpr std::array<double, 13> kDurationBoundsMs = {1,   2.5, 5,    10,   25,   50,  100,
                                                             250, 500, 1000, 2500, 5000, 10000};
inline constexpr size_t kDurationBuckets = kDurationBoundsMs.size() + 1;

// One loop's counts.
struct LoopMetrics {
  LoopCounter responses;  // every response, counted whether enabled or not
  struct Requests {
    std::array<LoopCounter, 5> by_class;  // 1xx .. 5xx
  };
  SlotTable<Requests> requests;  // by request series
  std::array<LoopCounter, kDurationBuckets> durations;  // per bucket, not cumulative
  LoopCounter duration_ms;  // summed
  LoopCounter file_cache_hits;
  LoopCounter file_cache_misses;
  LoopCounter response_cache_hits;
  LoopCounter response_cache_misses;
  LoopCounter response_cache_bypass;       // not looked up: `bypass` said so
  LoopCounter response_cache_stale;        // answered from a stale entry (the application failed, or updating)
  LoopCounter response_cache_revalidated;  // a stale entry the application confirmed (304)
  SlotTable<upstream::ServerCounters> upstreams;  // by upstream series
};

// The figures at one moment, summed over the loops.
struct MetricsSnapshot {
  double start_time = 0;  // Unix seconds
  double now = 0;
  struct Requests {
    std::string site;
    std::string location;
    std::array<uint64_t, 5> by_class{};
  };
  std::vector<Requests> requests;  // series that have counted a request
  std::array<uint64_t, kDurationBuckets> duration_buckets{};  // cumulative
  uint64_t duration_ms = 0;
  uint64_t bytes_received = 0;
  uint64_t bytes_sent = 0;
  struct Connections {
    uint64_t active = 0;
    uint64_t reading = 0;
    uint64_t writing = 0;
    uint64_t idle = 0;
    uint64_t accepted = 0;
    uint64_t shed = 0;
  } connections;
  struct Tls {
    uint64_t handshakes = 0;
    uint64_t resumed = 0;
    uint64_t failed = 0;
    uint64_t kernel = 0;  // connections sending through kernel TLS
  } tls;
  struct Upstream {
    std::string kind;  // "fastcgi" or "proxy"
    std::string group;
    std::string server;
    uint64_t requests = 0;
    uint64_t failures = 0;
    uint64_t latency_ms = 0;  // summed
    bool up = true;
  };
  std::vector<Upstream> upstreams;
  // Each [[limit]]'s table, since it was made (a reload that keeps the
  // limit keeps its counts).
  struct Limit {
    std::string name;
    std::string kind;  // "rate" or "connections"
    uint64_t delayed = 0;  // requests held for their turn
    uint64_t refused = 0;  // requests answered 429 (or its status), connections closed
    uint64_t keys = 0;     // keys in the table now
  };
  std::vector<Limit> limits;
  // Each [[cache]] zone now, and its bounds.
  struct CacheZone {
    std::string name;
    uint64_t entries = 0;
    uint64_t disk_bytes = 0;
    uint64_t memory_bytes = 0;
    uint64_t max_size = 0;
    uint64_t memory = 0;
  };
  std::vector<CacheZone> cache_zones;
  // Each certificate of a site with ACME (AcmeManager's status).
  struct Certificate {
    std::vector<std::string> names;
    int64_t not_after = 0;    // Unix seconds; 0: none readable
    bool self_signed = true;  // the stand-in, not the CA's yet
    std::string last_result;  // "issued", "failed: WHY", "" before any order
    int64_t last_attempt = 0;
    int64_t last_issued = 0;
  };
  std::vector<Certificate> certificates;
  uint64_t responses = 0;  // counted whether enabled or not
  uint64_t file_cache_hits = 0;
  uint64_t file_cache_misses = 0;
  uint64_t response_cache_hits = 0;
  uint64_t response_cache_misses = 0;
  uint64_t response_cache_bypass = 0;
  uint64_t response_cache_stale = 0;
  uint64_t response_cache_revalidated = 0;
  uint64_t error_log_dropped = 0;
  uint64_t access_log_dropped = 0;

  uint64_t requests_total() const;
};

class Metrics {
 public:
  Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Whether requests are counted (a metrics location is configured). Set on
  // the main thread, read by the loops.
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  void set_enabled(bool on) { enabled_.store(on, std::memory_order_relaxed); }

  // The series of a site and one of its locations ("": the site's requests
  // no location took; both "": requests before a site was known). The same
  // labels give the same number. Any thread.
  uint32_t request_series(std::string_view site, std::string_view location);
  uint32_t upstream_series(std::string_view kind, std::string_view group, std::string_view server);

  // `loop`'s counts, made on first use. That loop's thread.
  LoopMetrics& loop(net::EventLoop* loop);
  // Counts `group` (made on `loop` over `servers`) on that loop: its
  // series are `kind` ("fastcgi", "proxy"), `name` (the [[upstream]]'s, or
  // the address a FastCGI block passes to), each server's address.
  void count_group(net::EventLoop* loop, std::string_view kind, std::string_view name, upstream::Group& group,
                   const std::vector<upstream::GroupServer>& servers);

  // Counts a response; when enabled, by its series (Request::tag), status
  // class and duration (from its received_ms to the loop's clock). The
  // loop the response went out on.
  void record(net::EventLoop* loop, const http::Request& request, int status);

  // What the server adds to a snapshot (connections, bytes, TLS, logs).
  void set_extra(std::function<void(MetricsSnapshot*)> extra) { extra_ = std::move(extra); }
  // The figures now, summed over the loops. Any thread.
  MetricsSnapshot snapshot() const;
  // Only the responses counted so far (the service manager's STATUS line).
  uint64_t responses() const;

 private:
  struct Labels {
    std::vector<std::string> values;
  };
  uint32_t intern(std::vector<Labels>& table, std::vector<std::string> values, size_t capacity);

  std::atomic<bool> enabled_{false};
  double start_time_;
  mutable std::mutex mu_;  // the label tables
  std::vector<Labels> request_labels_;   // by series
  std::vector<Labels> upstream_labels_;  // by series
  net::LoopLocal<LoopMetrics> loops_;
  std::function<void(MetricsSnapshot*)> extra_;
};

// A site's label: its first name, "_" for a site of any name.
std::string site_label(const std::vector<std::string>& names);
// A location's label, as nginx writes it: "/img/", "= /favicon.ico",
// "~ \.php$", "~* \.jpg$", "^~ /static/".
std::string location_label(const LocationConfig& location);

}  // namespace tern::server
