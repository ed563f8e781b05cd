// The [[limit]] tables: KeyTable's bound and least-recently-used order,
// RateLimit's leaky bucket as nginx's limit_req counts it (rate, burst,
// delay, nodelay) on a clock the test moves, and ConcurrencyLimit's places
// per key as nginx's limit_conn.
#include "server/limits/concurrency_limit.h"
#include "server/limits/rate_limit.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace tern::server {
namespace {

using std::chrono::milliseconds;

TEST(KeyTableTest, TheLeastRecentlyUsedKeyGivesWayWhenFull) {
  KeyTable<int> table(3, /*shards=*/1);
  auto set = [&](std::string_view key, int value) {
    return table.with(table.hash(key), [value](int& v, bool fresh) {
      v = value;
      return fresh;
    });
  };
  auto get = [&](std::string_view key) {
    int out = -1;
    table.if_present(table.hash(key), [&](int& v) { out = v; }, [](const int&) { return true; });
    return out;
  };
  EXPECT_TRUE(set("a", 1));
  EXPECT_TRUE(set("b", 2));
  EXPECT_TRUE(set("c", 3));
  EXPECT_FALSE(set("a", 10));  // a is now the most recent
  EXPECT_TRUE(set("d", 4));    // b, the least recent, gives way
  EXPECT_EQ(get("b"), -1);
  EXPECT_EQ(get("a"), 10);
  EXPECT_EQ(get("c"), 3);
  EXPECT_EQ(get("d"), 4);
  EXPECT_EQ(table.size(), 3u);
  // A key taken out frees its node.
  EXPECT_TRUE(table.if_present(table.hash("c"), [](int&) {}, [](const int&) { return false; }));
  EXPECT_EQ(get("c"), -1);
  EXPECT_EQ(table.size(), 2u);
  EXPECT_TRUE(set("e", 5));
  EXPECT_EQ(get("a"), 10);
  EXPECT_EQ(get("d"), 4);
}

TEST(KeyTableTest, ManyKeysStayWithinTheCapacity) {
  KeyTable<int> table(1000);
  for (int i = 0; i < 100'000; ++i) {
    table.with(table.hash("key " + std::to_string(i)), [](int& v, bool) { ++v; });
  }
  EXPECT_LE(table.size(), table.capacity());
  EXPECT_GE(table.capacity(), 1000u);
  EXPECT_LT(table.capacity(), 1100u);
  // The most recent keys are still there, with their counts.
  int count = 0;
  EXPECT_TRUE(table.if_present(table.hash("key 99999"), [&](int& v) { count = v; }, [](const int&) { return true; }));
  EXPECT_EQ(count, 1);
}

TEST(KeyTableTest, TwoTablesHashTheSameKeyApart) {
  // A random key per table: hashes cannot be worked out from outside.
  KeyTable<int> a(10), b(10);
  EXPECT_NE(a.hash("203.0.113.7"), b.hash("203.0.113.7"));
  EXPECT_EQ(a.hash("203.0.113.7"), a.hash("203.0.113.7"));
}

TEST(RateLimitTest, WithoutBurstOneRequestPerIntervalPasses) {
  RateLimit limit({.rate_milli = 10'000});  // 10r/s: one per 100 ms
  EXPECT_TRUE(limit.check("a", 1000).allowed);
  const RateLimit::Verdict refused = limit.check("a", 1000);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.wait, milliseconds(100));
  EXPECT_FALSE(limit.check("a", 1050).allowed);  // a refused request counts for nothing
  EXPECT_TRUE(limit.check("a", 1100).allowed);
  EXPECT_EQ(limit.check("a", 1100).wait, milliseconds(100));
  // Another key is limited on its own.
  EXPECT_TRUE(limit.check("b", 1100).allowed);
}

TEST(RateLimitTest, ABurstIsQueuedAndPacedAtTheRate) {
  RateLimit limit({.rate_milli = 10'000, .burst = 5});
  std::vector<int64_t> waits;
  for (int i = 0; i < 6; ++i) {
    const RateLimit::Verdict v = limit.check("a", 0);
    ASSERT_TRUE(v.allowed) << i;
    waits.push_back(v.wait.count());
  }
  EXPECT_EQ(waits, (std::vector<int64_t>{0, 100, 200, 300, 400, 500}));
  const RateLimit::Verdict over = limit.check("a", 0);
  EXPECT_FALSE(over.allowed);
  EXPECT_EQ(over.wait, milliseconds(100));
  // After 300 ms three have drained.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limit.check("a", 300).allowed) << i;
  EXPECT_FALSE(limit.check("a", 300).allowed);
}

TEST(RateLimitTest, DelaySendsThatManyAtOnceAndNodelayAll) {
  RateLimit some({.rate_milli = 10'000, .burst = 5, .delay = 2});
  std::vector<int64_t> waits;
  for (int i = 0; i < 6; ++i) waits.push_back(some.check("a", 0).wait.count());
  EXPECT_EQ(waits, (std::vector<int64_t>{0, 0, 0, 100, 200, 300}));

  RateLimit nodelay({.rate_milli = 10'000, .burst = 5, .delay = 5});
  for (int i = 0; i < 6; ++i) {
    const RateLimit::Verdict v = nodelay.check("a", 0);
    EXPECT_TRUE(v.allowed && v.wait == milliseconds(0)) << i;
  }
  EXPECT_FALSE(nodelay.check("a", 0).allowed);
}

TEST(RateLimitTest, APerMinuteRateDrainsAtItsPace) {
  RateLimit limit({.rate_milli = 500});  // 30r/m: one per 2 s
  EXPECT_TRUE(limit.check("a", 0).allowed);
  const RateLimit::Verdict refused = limit.check("a", 1000);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.wait, milliseconds(1000));
  EXPECT_TRUE(limit.check("a", 2000).allowed);
}

// Every worker shares the table: the bucket's count holds however many
// threads check at once.
TEST(RateLimitTest, ThreadsCheckingOneKeyAtOnceShareItsBurst) {
  RateLimit limit({.rate_milli = 1000, .burst = 100, .delay = 100});
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        if (limit.check("shared", 0).allowed) allowed.fetch_add(1);
        (void)limit.check("own " + std::to_string(i), 0);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(allowed.load(), 101);
}

TEST(ConcurrencyLimitTest, EachKeyHasItsOwnPlacesAndGetsThemBack) {
  ConcurrencyLimit limit({.connections = 2});
  EXPECT_TRUE(limit.acquire("a", 0).allowed);
  EXPECT_TRUE(limit.acquire("a", 0).allowed);
  EXPECT_FALSE(limit.acquire("a", 0).allowed);
  EXPECT_TRUE(limit.acquire("b", 0).allowed);  // another key is not held back
  limit.release("a");
  EXPECT_TRUE(limit.acquire("a", 0).allowed);
  EXPECT_FALSE(limit.acquire("a", 0).allowed);
  // A key with no place taken leaves the table.
  limit.release("b");
  EXPECT_EQ(limit.keys(), 1u);
  limit.release("a");
  limit.release("a");
  EXPECT_EQ(limit.keys(), 0u);
  limit.release("a");  // one too many changes nothing
  EXPECT_EQ(limit.keys(), 0u);
  EXPECT_TRUE(limit.acquire("a", 0).allowed);
}

TEST(ConcurrencyLimitTest, ThreadsNeverHoldMoreThanTheLimit) {
  ConcurrencyLimit limit({.connections = 3});
  std::atomic<int> held{0};
  std::atomic<int> most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        if (!limit.acquire("shared", 0).allowed) continue;
        const int now = held.fetch_add(1) + 1;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        held.fetch_sub(1);
        limit.release("shared");
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LE(most.load(), 3);
  EXPECT_GE(most.load(), 1);
  EXPECT_EQ(limit.keys(), 0u);
}


TEST(RateLimitTest, CountsHeldAndRefusedRequestsAndLogsAKeyOnceASecond) {
  RateLimit limit({.rate_milli = 500, .burst = 1});  // 30r/m
  EXPECT_TRUE(limit.check("a", 0).allowed);
  const RateLimit::Verdict held = limit.check("a", 0);  // the burst: waits its turn
  EXPECT_TRUE(held.allowed);
  EXPECT_EQ(held.wait, milliseconds(2000));
  const RateLimit::Verdict first = limit.check("a", 100);
  EXPECT_FALSE(first.allowed);
  EXPECT_TRUE(first.first_this_second);
  EXPECT_FALSE(limit.check("a", 900).first_this_second);  // the same second
  EXPECT_TRUE(limit.check("b", 900).allowed);
  const RateLimit::Verdict later = limit.check("a", 1100);
  EXPECT_FALSE(later.allowed);
  EXPECT_TRUE(later.first_this_second);  // a new second
  EXPECT_EQ(limit.counts().delayed, 1u);
  EXPECT_EQ(limit.counts().refused, 3u);
}

TEST(RateLimitTest, AReloadOfTheSameSizeKeepsTheBucketsAndCounts) {
  RateLimit before({.rate_milli = 1000, .burst = 0, .size = 100});
  EXPECT_TRUE(before.check("a", 0).allowed);
  EXPECT_FALSE(before.check("a", 0).allowed);
  // A new rate, the same table: "a" is still over it.
  RateLimit after({.rate_milli = 2000, .burst = 0, .size = 100}, &before);
  EXPECT_FALSE(after.check("a", 100).allowed);
  EXPECT_EQ(after.counts().refused, 2u);
  EXPECT_EQ(after.keys(), 1u);
  // Another size starts afresh.
  RateLimit resized({.rate_milli = 1000, .burst = 0, .size = 200}, &after);
  EXPECT_TRUE(resized.check("a", 100).allowed);
  EXPECT_EQ(resized.counts().refused, 0u);
}

TEST(ConcurrencyLimitTest, CountsRefusalsAndKeepsPlacesAcrossAReload) {
  ConcurrencyLimit before({.connections = 1, .size = 10});
  EXPECT_TRUE(before.acquire("a", 5).allowed);
  const ConcurrencyLimit::Verdict refused = before.acquire("a", 5);
  EXPECT_FALSE(refused.allowed);
  EXPECT_TRUE(refused.first_this_second);
  EXPECT_FALSE(before.acquire("a", 5).first_this_second);
  EXPECT_TRUE(before.acquire("a", 6).first_this_second);
  EXPECT_EQ(before.refused(), 3u);
  // The place "a" holds stays taken under the new settings; a release made
  // through either is the same.
  ConcurrencyLimit after({.connections = 2, .size = 10}, &before);
  EXPECT_TRUE(after.acquire("a", 7).allowed);
  EXPECT_FALSE(after.acquire("a", 7).allowed);
  before.release("a");
  EXPECT_TRUE(after.acquire("a", 7).allowed);
}

}  // namespace
}  // namespace tern::server
