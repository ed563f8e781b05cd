// RequestStatePool: spares for as many requests as were lately in flight
// at once, given back a period after they stopped being needed.
#include "http1/request_state.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace tern::http {
namespace {

using Pool = RequestStatePool;
using std::chrono::seconds;

// Takes `count` states at once and gives them back at `now`; the states' addresses.
std::set<const RequestState*> burst(Pool& pool, size_t count, Pool::Time now) {
  std::vector<std::unique_ptr<RequestState>> taken;
  std::set<const RequestState*> addresses;
  for (size_t i = 0; i < count; ++i) {
    taken.push_back(pool.acquire());
    addresses.insert(taken.back().get());
  }
  for (auto& state : taken) pool.release(std::move(state), now);
  return addresses;
}

TEST(RequestStatePool, ABurstIsServedAgainFromItsOwnSpares) {
  Pool pool;
  const Pool::Time t0{seconds(1000)};
  const auto first = burst(pool, 1000, t0);
  EXPECT_EQ(pool.idle(), 1000u);
  // The next burst, within the period, makes no new state.
  const auto second = burst(pool, 1000, t0 + seconds(1));
  EXPECT_EQ(first, second);
}

TEST(RequestStatePool, SparesUnusedForAPeriodAreGivenBackDownToTheMinimum) {
  Pool pool;
  const Pool::Time t0{seconds(1000)};
  burst(pool, 1000, t0);
  // Quiet periods, one request at a time: the period the burst ended in
  // keeps what it had; the first one that never needed them gives back all
  // but the minimum.
  burst(pool, 1, t0 + Pool::kPeriod / 2);
  EXPECT_EQ(pool.idle(), 1000u);
  burst(pool, 1, t0 + Pool::kPeriod + seconds(1));
  EXPECT_GE(pool.idle(), Pool::kMinSpare);
  burst(pool, 1, t0 + 2 * Pool::kPeriod + seconds(2));
  EXPECT_EQ(pool.idle(), Pool::kMinSpare);
}

TEST(RequestStatePool, SparesTakenDuringThePeriodStayForTheNext) {
  Pool pool;
  const Pool::Time t0{seconds(1000)};
  burst(pool, 1000, t0);
  burst(pool, 1, t0 + Pool::kPeriod + seconds(1));  // a new period begins
  const size_t before = pool.idle();
  burst(pool, 600, t0 + Pool::kPeriod + seconds(5));
  burst(pool, 1, t0 + 2 * Pool::kPeriod + seconds(2));
  // 600 were taken at once during the period: they stay, the rest goes.
  EXPECT_GT(before, 600u);
  EXPECT_EQ(pool.idle(), 600u);
  burst(pool, 1, t0 + 3 * Pool::kPeriod + seconds(3));
  EXPECT_EQ(pool.idle(), Pool::kMinSpare);
}

}  // namespace
}  // namespace tern::http
