#include "net/timeout.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "net/event_loop.h"
#include "support/loop_runner.h"

namespace tern::net {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using tern::testing::LoopRunner;

// A Timeout owned by the test: counts its firings and reports the first.
struct Watched {
  Timeout timeout{&Watched::fire, this};
  std::atomic<int> fired{0};
  std::promise<Clock::time_point> first;

  static void fire(void* self) {
    auto* w = static_cast<Watched*>(self);
    if (w->fired++ == 0) w->first.set_value(Clock::now());
  }
};

TEST(Timeout, FiresOnceNoEarlierThanItsDelay) {
  LoopRunner runner;
  Watched w;
  auto future = w.first.get_future();
  const auto start = Clock::now();
  runner.run([&] {
    w.timeout.arm(20ms);
    EXPECT_TRUE(w.timeout.armed());
  });
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
  EXPECT_GE(future.get() - start, 19ms);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(w.fired, 1);
  EXPECT_FALSE(runner.run([&] { return w.timeout.armed(); }));
}

TEST(Timeout, PushedBackFiresAtTheLaterDeadlineOnly) {
  LoopRunner runner;
  Watched w;
  auto future = w.first.get_future();
  const auto start = Clock::now();
  runner.run([&] {
    w.timeout.arm(30ms);
    // Pushed back twice before the first deadline: the wheel's timer comes
    // up at 30 ms and must be placed again rather than fire.
    runner.loop()->run_after(10ms, [&] { w.timeout.arm(60ms); });
    runner.loop()->run_after(20ms, [&] { w.timeout.arm(60ms); });
  });
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
  EXPECT_GE(future.get() - start, 79ms);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(w.fired, 1);
}

TEST(Timeout, PulledForwardFiresAtTheEarlierDeadline) {
  LoopRunner runner;
  Watched w;
  auto future = w.first.get_future();
  runner.run([&] {
    w.timeout.arm(5000ms);
    w.timeout.arm(10ms);
  });
  ASSERT_EQ(future.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(w.fired, 1);
}

TEST(Timeout, PushedBackThenPulledForwardAgainFiresAtTheLastDeadline) {
  LoopRunner runner;
  Watched w;
  auto future = w.first.get_future();
  const auto start = Clock::now();
  runner.run([&] {
    w.timeout.arm(40ms);
    w.timeout.arm(5000ms);  // later: only stored
    w.timeout.arm(60ms);    // earlier than stored, later than placed
  });
  ASSERT_EQ(future.wait_for(2s), std::future_status::ready);
  EXPECT_GE(future.get() - start, 59ms);
}

TEST(Timeout, CancelledNeverFires) {
  LoopRunner runner;
  Watched w;
  runner.run([&] {
    w.timeout.arm(10ms);
    w.timeout.arm(30ms);
    w.timeout.cancel();
    EXPECT_FALSE(w.timeout.armed());
    EXPECT_EQ(w.timeout.deadline_ms(), 0u);
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(w.fired, 0);
}

TEST(Timeout, HandlerMayArmItAgain) {
  LoopRunner runner;
  struct Repeating {
    Timeout timeout{&Repeating::fire, this};
    int left = 3;
    std::promise<void> done;
    static void fire(void* self) {
      auto* r = static_cast<Repeating*>(self);
      if (--r->left > 0) return r->timeout.arm(5ms);
      r->done.set_value();
    }
  } r;
  auto future = r.done.get_future();
  runner.run([&] { r.timeout.arm(5ms); });
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(r.left, 0);
}

TEST(Timeout, DeadlineFollowsTheLoopClock) {
  LoopRunner runner;
  Watched w;
  runner.run([&] {
    const uint64_t now = runner.loop()->clock().now_ms();
    w.timeout.arm(250ms);
    EXPECT_EQ(w.timeout.deadline_ms(), now + 250);
    w.timeout.arm(0ms);  // due at the next tick, never "not armed"
    EXPECT_EQ(w.timeout.deadline_ms(), now + 1);
    w.timeout.cancel();
  });
}

}  // namespace
}  // namespace tern::net
