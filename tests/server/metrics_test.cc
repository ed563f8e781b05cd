// Metrics: series, per-loop counts summed by a snapshot, and the two
// formats they leave in (Prometheus text read back line by line, the JSON
// parsed).
#include "server/observability/metrics.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <future>
#include <map>
#include <sstream>
#include <thread>

#include "http/request.h"
#include "net/event_loop.h"
#include "net/event_loop_thread.h"
#include "server/config/config.h"
#include "server/observability/metrics_text.h"

namespace tern::server {
namespace {

TEST(SlotTableTest, SlotsStayWhereTheyAreAsTheTableGrows) {
  SlotTable<LoopCounter, 4, 8> table;
  EXPECT_EQ(table.find(0), nullptr);
  LoopCounter& first = table.at(1);
  first.add(5);
  for (size_t i = 0; i < 32; ++i) table.at(i).add();
  EXPECT_EQ(&table.at(1), &first);
  EXPECT_EQ(table.find(1)->get(), 6u);
  EXPECT_EQ(table.find(31)->get(), 1u);
  EXPECT_EQ(table.find(32), nullptr);  // past the capacity
}

TEST(MetricsTest, SeriesAreInternedByTheirLabels) {
  Metrics metrics;
  const uint32_t a = metrics.request_series("example.com", "/");
  EXPECT_NE(a, 0u);  // 0 is for requests before a site is known
  EXPECT_EQ(metrics.request_series("example.com", "/"), a);
  EXPECT_NE(metrics.request_series("example.com", "= /x"), a);
  EXPECT_EQ(metrics.upstream_series("proxy", "api", "10.0.0.1:80"),
            metrics.upstream_series("proxy", "api", "10.0.0.1:80"));
}

TEST(MetricsTest, LoopsCountApartAndASnapshotSumsThem) {
  Metrics metrics;
  metrics.set_enabled(true);
  const uint32_t root = metrics.request_series("a", "/");
  net::EventLoop here;
  http::Request request;
  request.set_received_ms(static_cast<int64_t>(here.clock().now_ms()));
  request.set_tag(root);
  metrics.record(&here, request, 200);
  metrics.record(&here, request, 404);
  // Another loop on its own thread counts into its own counters.
  net::EventLoopThread other_thread("metrics-test");
  net::EventLoop* other = other_thread.start();
  std::promise<void> done;
  other->run_in_loop([&] {
    http::Request r;
    r.set_tag(root);
    metrics.record(other, r, 200);
    metrics.record(other, r, 503);
    metrics.record(other, http::Request{}, 400);  // tag 0: no site
    done.set_value();
  });
  done.get_future().wait();

  const MetricsSnapshot s = metrics.snapshot();
  ASSERT_EQ(s.requests.size(), 2u);
  std::map<std::string, std::array<uint64_t, 5>> by_location;
  for (const auto& series : s.requests) by_location[series.site + "|" + series.location] = series.by_class;
  EXPECT_EQ(by_location["a|/"], (std::array<uint64_t, 5>{0, 2, 0, 1, 1}));
  EXPECT_EQ(by_location["|"], (std::array<uint64_t, 5>{0, 0, 0, 1, 0}));
  EXPECT_EQ(s.requests_total(), 5u);
  EXPECT_EQ(s.duration_buckets.back(), 5u);  // +Inf holds every request
  EXPECT_EQ(s.responses, 5u);
}

TEST(MetricsTest, AnUpstreamIsUpByTheLatestVerdictOverTheLoops) {
  Metrics metrics;
  const uint32_t series = metrics.upstream_series("proxy", "api", "10.0.0.1:80");
  net::EventLoop here;
  upstream::ServerCounters& mine = metrics.loop(&here).upstreams.at(series);
  net::EventLoopThread other_thread("metrics-test");
  net::EventLoop* other = other_thread.start();
  std::promise<upstream::ServerCounters*> theirs;
  other->run_in_loop([&] { theirs.set_value(&metrics.loop(other).upstreams.at(series)); });
  upstream::ServerCounters* elsewhere = theirs.get_future().get();
  auto up = [&metrics] {
    const MetricsSnapshot s = metrics.snapshot();
    EXPECT_EQ(s.upstreams.size(), 1u);  // series 0, the overflow, is not shown
    return !s.upstreams.empty() && s.upstreams[0].up;
  };
  EXPECT_TRUE(up());  // no verdict yet
  mine.check.store((100 << 1) | 1);  // this loop saw it down at 100 ms
  EXPECT_FALSE(up());
  elsewhere->check.store(200 << 1);  // and the other loop up, later: up
  EXPECT_TRUE(up());
  // Passive health: out of the rotation until a time still to come.
  mine.down_until_ms.store(static_cast<int64_t>(CachedClock::to_ms(std::chrono::steady_clock::now())) + 60000);
  EXPECT_FALSE(up());
}

TEST(MetricsTest, OffCountsResponsesOnly) {
  Metrics metrics;
  net::EventLoop here;
  metrics.record(&here, http::Request{}, 200);
  const MetricsSnapshot s = metrics.snapshot();
  EXPECT_EQ(s.responses, 1u);
  EXPECT_EQ(s.requests_total(), 0u);
}

TEST(MetricsTest, LocationLabelsReadAsNginxWritesThem) {
  LocationConfig l;
  l.pattern = "/img/";
  EXPECT_EQ(location_label(l), "/img/");
  l.skip_regex = true;
  EXPECT_EQ(location_label(l), "^~ /img/");
  l.match = LocationConfig::Match::kExact;
  EXPECT_EQ(location_label(l), "= /img/");
  l.match = LocationConfig::Match::kRegexCaseless;
  l.pattern = "\\.jpg$";
  EXPECT_EQ(location_label(l), "~* \\.jpg$");
  EXPECT_EQ(site_label({}), "_");
  EXPECT_EQ(site_label({"", "b.test"}), "b.test");
}

MetricsSnapshot sample_snapshot() {
  MetricsSnapshot s;
  s.start_time = 1764230000.5;
  s.now = 1764230012.25;
  s.requests.push_back({"ex\"ample", "~ \\.php$", {0, 7, 1, 2, 0}});
  uint64_t cumulative = 0;
  for (size_t b = 0; b < kDurationBuckets; ++b) s.duration_buckets[b] = cumulative += (b < 3 ? 3 : 0);
  s.duration_ms = 42;
  s.bytes_received = 100;
  s.bytes_sent = 2000;
  s.connections = {5, 1, 2, 2, 9, 1};
  s.upstreams.push_back({"fastcgi", "fastcgi 127.0.0.1:9000", "127.0.0.1:9000", 4, 1, 250, false});
  s.file_cache_hits = 8;
  s.access_log_dropped = 3;
  return s;
}

// name{labels} -> value, and the TYPE of each family.
struct Exposition {
  std::map<std::string, std::string> samples;
  std::map<std::string, std::string> types;
};

Exposition parse(const std::string& text) {
  Exposition e;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      const std::string rest = line.substr(7);
      e.types[rest.substr(0, rest.find(' '))] = rest.substr(rest.find(' ') + 1);
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    e.samples[line.substr(0, space)] = line.substr(space + 1);
  }
  return e;
}

TEST(MetricsTextTest, PrometheusTextHasEveryFamilyTypedAndLabelsEscaped) {
  const std::string text = prometheus_text(sample_snapshot(), "1.2.3");
  const Exposition e = parse(text);
  EXPECT_EQ(e.samples.at("tern_requests_total{site=\"ex\\\"ample\",location=\"~ \\\\.php$\",class=\"2xx\"}"), "7");
  EXPECT_EQ(e.samples.count("tern_requests_total{site=\"ex\\\"ample\",location=\"~ \\\\.php$\",class=\"5xx\"}"),
            0u);  // a class without requests is left out
  EXPECT_EQ(e.samples.at("tern_request_duration_seconds_bucket{le=\"0.001\"}"), "3");
  EXPECT_EQ(e.samples.at("tern_request_duration_seconds_bucket{le=\"+Inf\"}"), "9");
  EXPECT_EQ(e.samples.at("tern_request_duration_seconds_count"), "9");
  EXPECT_EQ(e.samples.at("tern_request_duration_seconds_sum"), "0.042");
  EXPECT_EQ(e.samples.at("tern_connections{state=\"writing\"}"), "2");
  EXPECT_EQ(e.samples.at("tern_connections_shed_total"), "1");
  EXPECT_EQ(e.samples.at(
                "tern_upstream_up{kind=\"fastcgi\",group=\"fastcgi 127.0.0.1:9000\",server=\"127.0.0.1:9000\"}"),
            "0");
  EXPECT_EQ(e.samples.at("tern_log_dropped_total{log=\"access\"}"), "3");
  EXPECT_EQ(e.samples.at("tern_build_info{version=\"1.2.3\"}"), "1");
  EXPECT_EQ(e.types.at("tern_request_duration_seconds"), "histogram");
  // Every sample belongs to a family declared before it.
  for (const auto& [name, value] : e.samples) {
    std::string family = name.substr(0, name.find('{'));
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (family.size() > s.size() && family.ends_with(s) && e.types.count(family) == 0) {
        family.resize(family.size() - s.size());
      }
    }
    EXPECT_EQ(e.types.count(family), 1u) << name;
  }
  // Buckets are cumulative.
  std::string previous = "0";
  for (double bound : kDurationBoundsMs) {
    const std::string key = "tern_request_duration_seconds_bucket{le=\"" + fmt::format("{}", bound / 1000.0) + "\"}";
    ASSERT_EQ(e.samples.count(key), 1u) << key;
    EXPECT_GE(std::stoull(e.samples.at(key)), std::stoull(previous));
    previous = e.samples.at(key);
  }
}

TEST(MetricsTextTest, StatusJsonCarriesTheSameFigures) {
  const nlohmann::json j = nlohmann::json::parse(status_json(sample_snapshot(), "1.2.3"));
  EXPECT_EQ(j["version"], "1.2.3");
  EXPECT_EQ(j["requests"]["total"], 10);
  EXPECT_EQ(j["requests"]["by_class"]["4xx"], 2);
  EXPECT_EQ(j["locations"][0]["site"], "ex\"ample");
  EXPECT_EQ(j["locations"][0]["location"], "~ \\.php$");
  EXPECT_EQ(j["duration"]["buckets"].size(), kDurationBuckets);
  EXPECT_EQ(j["duration"]["bounds"].size(), kDurationBoundsMs.size());
  EXPECT_EQ(j["duration"]["count"], 9);
  EXPECT_EQ(j["connections"]["idle"], 2);
  EXPECT_EQ(j["upstreams"][0]["up"], false);
  EXPECT_DOUBLE_EQ(j["upstreams"][0]["latency_sum"].get<double>(), 0.25);
  EXPECT_EQ(j["caches"]["open_file"]["hits"], 8);
  EXPECT_EQ(j["log"]["dropped"]["access"], 3);
  EXPECT_DOUBLE_EQ(j["time"].get<double>(), 1764230012.25);
}

}  // namespace
}  // namespace tern::server
