// Balancer: shares by weight, the smooth order, least connections, the
// consistent-hash ring and how little of it moves, passive health, backups
// and retries.
#include "upstream/balancer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace tern::upstream {
namespace {

using Clock = Balancer::Clock;
using Method = Balancer::Method;
using namespace std::chrono_literals;

std::vector<ServerSpec> servers(std::vector<unsigned> weights) {
  std::vector<ServerSpec> out;
  for (size_t i = 0; i < weights.size(); ++i) {
    ServerSpec spec;
    spec.address = "10.0.0." + std::to_string(i + 1) + ":80";
    spec.weight = weights[i];
    out.push_back(spec);
  }
  return out;
}

const Clock::time_point kNow = Clock::now();

TEST(BalancerTest, RoundRobinInterleavesByWeightAsNginxDoes) {
  Balancer group(servers({5, 1, 1}), Method::kRoundRobin);
  std::string order;
  for (int i = 0; i < 14; ++i) order += static_cast<char>('a' + *group.pick("", 0, kNow));
  EXPECT_EQ(order, "aabacaaaabacaa");
}

TEST(BalancerTest, SharesOver10000RequestsAreWithin5PercentOfTheWeights) {
  for (const Method method : {Method::kRoundRobin, Method::kHash}) {
    Balancer group(servers({5, 3, 2}), method);
    std::map<size_t, int> counts;
    for (int i = 0; i < 10000; ++i) ++counts[*group.pick("client-" + std::to_string(i), 0, kNow)];
    const double expected[] = {0.5, 0.3, 0.2};
    for (size_t s = 0; s < 3; ++s) {
      SCOPED_TRACE("method " + std::to_string(static_cast<int>(method)) + ", server " + std::to_string(s));
      EXPECT_NEAR(counts[s] / 10000.0, expected[s], 0.05 * expected[s]);
    }
  }
}

TEST(BalancerTest, LeastConnectionsGoesToTheFewestForTheirWeight) {
  Balancer group(servers({1, 1, 2}), Method::kLeastConnections);
  group.started(0);
  group.started(1);
  // 0 and 1 have one each, 2 none.
  EXPECT_EQ(group.pick("", 0, kNow), 2u);
  group.started(2);
  // 2 has one for a weight of two: still the least loaded.
  EXPECT_EQ(group.pick("", 0, kNow), 2u);
  group.started(2);
  group.started(2);
  EXPECT_NE(group.pick("", 0, kNow), 2u);
  group.finished(0);
  EXPECT_EQ(group.pick("", 0, kNow), 0u);
}

TEST(BalancerTest, LeastConnectionsSharesAmongEquals) {
  Balancer group(servers({1, 1, 1}), Method::kLeastConnections);
  std::map<size_t, int> counts;
  for (int i = 0; i < 300; ++i) ++counts[*group.pick("", 0, kNow)];
  EXPECT_EQ(counts[0], 100);
  EXPECT_EQ(counts[1], 100);
  EXPECT_EQ(counts[2], 100);
}

TEST(BalancerTest, AKeyKeepsItsServerAndOnlyTheLeaversKeysMove) {
  constexpr int kKeys = 10000;
  for (const size_t n : {3u, 5u}) {
    Balancer group(servers(std::vector<unsigned>(n, 1)), Method::kHash);
    std::vector<size_t> before(kKeys);
    for (int k = 0; k < kKeys; ++k) {
      before[k] = *group.pick("/page/" + std::to_string(k), 0, kNow);
      ASSERT_EQ(group.pick("/page/" + std::to_string(k), 0, kNow), before[k]);
    }
    group.set_up(1, false);
    int moved = 0;
    for (int k = 0; k < kKeys; ++k) {
      const size_t after = *group.pick("/page/" + std::to_string(k), 0, kNow);
      ASSERT_NE(after, 1u);
      if (before[k] != 1) {
        EXPECT_EQ(after, before[k]) << "key " << k << " moved though its server stayed";
      }
      moved += after != before[k];
    }
    SCOPED_TRACE(std::to_string(n) + " servers");
    EXPECT_LE(moved, kKeys * (1.0 / n + 0.05));
    EXPECT_GT(moved, 0);
    // Back up: every key is home again.
    group.set_up(1, true);
    for (int k = 0; k < kKeys; ++k) {
      ASSERT_EQ(group.pick("/page/" + std::to_string(k), 0, kNow), before[k]);
    }
  }
}

TEST(BalancerTest, MaxFailsWithinFailTimeoutTakesAServerOutForFailTimeout) {
  std::vector<ServerSpec> specs = servers({1, 1});
  specs[0].max_fails = 2;
  specs[0].fail_timeout = 10s;
  Balancer group(std::move(specs), Method::kRoundRobin);
  group.failed(0, kNow);
  EXPECT_TRUE(group.available(0, kNow));
  // A failure outside the window starts a new count.
  group.failed(0, kNow + 11s);
  EXPECT_TRUE(group.available(0, kNow + 11s));
  group.failed(0, kNow + 12s);
  EXPECT_FALSE(group.available(0, kNow + 12s));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(group.pick("", 0, kNow + 13s), 1u);
  EXPECT_TRUE(group.available(0, kNow + 22s));
  // A success clears the count.
  group.failed(0, kNow + 23s);
  group.succeeded(0);
  group.failed(0, kNow + 24s);
  EXPECT_TRUE(group.available(0, kNow + 24s));
}

TEST(BalancerTest, BackupsServeOnlyWhileNoPrimaryIs) {
  std::vector<ServerSpec> specs = servers({1, 1, 1});
  specs[2].backup = true;
  for (const Method method : {Method::kRoundRobin, Method::kLeastConnections, Method::kHash}) {
    Balancer group(specs, method);
    for (int i = 0; i < 20; ++i) EXPECT_NE(group.pick(std::to_string(i), 0, kNow), 2u);
    group.set_up(0, false);
    group.set_up(1, false);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(group.pick(std::to_string(i), 0, kNow), 2u);
    group.set_up(2, false);
    EXPECT_EQ(group.pick("x", 0, kNow), std::nullopt);
  }
}

TEST(BalancerTest, ARetrySkipsTheServersTriedAndEndsWhenNoneIsLeft) {
  for (const Method method : {Method::kRoundRobin, Method::kLeastConnections, Method::kHash}) {
    Balancer group(servers({1, 1, 1}), method);
    uint64_t tried = 0;
    for (int attempt = 0; attempt < 3; ++attempt) {
      const std::optional<size_t> server = group.pick("key", tried, kNow);
      ASSERT_TRUE(server.has_value());
      EXPECT_EQ((tried >> *server) & 1, 0u);
      tried |= uint64_t{1} << *server;
    }
    EXPECT_EQ(group.pick("key", tried, kNow), std::nullopt);
  }
}

}  // namespace
}  // namespace tern::upstream
