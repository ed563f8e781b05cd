#include "net/event_loop.h"

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "net/channel.h"
#include "net/event_loop_thread.h"
#include "support/loop_runner.h"

namespace tern::net {
namespace {

using namespace std::chrono_literals;
using tern::testing::LoopRunner;

TEST(EventLoop, QueueInLoopFromManyThreadsRunsEveryFunctorOnTheLoopThread) {
  LoopRunner runner;
  const pid_t loop_tid = runner.run([&] { return static_cast<pid_t>(::gettid()); });
  constexpr int kThreads = 4;
  constexpr int kPerThread = 10000;
  std::atomic<int> ran{0};
  std::atomic<int> wrong_thread{0};
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        runner.loop()->queue_in_loop([&] {
          if (::gettid() != loop_tid) wrong_thread.fetch_add(1);
          ran.fetch_add(1);
        });
      }
    });
  }
  for (auto& p : producers) p.join();
  // A functor queued last runs after every earlier one from this thread.
  runner.run([] {});
  EXPECT_EQ(ran.load(), kThreads * kPerThread);
  EXPECT_EQ(wrong_thread.load(), 0);
}

TEST(EventLoop, RunInLoopOnLoopThreadRunsImmediately) {
  LoopRunner runner;
  bool inner_ran_inline = runner.run([&] {
    bool ran = false;
    runner.loop()->run_in_loop([&] { ran = true; });
    return ran;
  });
  EXPECT_TRUE(inner_ran_inline);
}

TEST(EventLoop, FunctorQueuedWhileRunningQueuedFunctorsRunsWithoutOtherWakeup) {
  LoopRunner runner;
  std::promise<void> second_ran;
  runner.loop()->queue_in_loop([&] {
    // Queued from within the pending phase: must wake the loop itself.
    runner.loop()->queue_in_loop([&] { second_ran.set_value(); });
  });
  EXPECT_EQ(second_ran.get_future().wait_for(5s), std::future_status::ready);
}

TEST(EventLoop, DeferredWorkRunsAfterTheCurrentRound) {
  LoopRunner runner;
  std::vector<int> after;
  runner.run([&] {
    runner.loop()->defer([&after] { after.push_back(2); });
    after.push_back(1);
  });
  runner.run([] {});  // the deferred call ran at the end of that round
  EXPECT_EQ(after, (std::vector<int>{1, 2}));
}

TEST(EventLoop, RunAfterFiresNoEarlierThanItsDelay) {
  LoopRunner runner;
  std::promise<std::chrono::steady_clock::time_point> fired;
  auto start = std::chrono::steady_clock::now();
  runner.run([&] {
    runner.loop()->run_after(30ms, [&] { fired.set_value(std::chrono::steady_clock::now()); });
  });
  auto future = fired.get_future();
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
  // The loop's clock may be up to one round stale, so allow 1 ms of slack.
  EXPECT_GE(future.get() - start, 29ms);
}

TEST(EventLoop, RunEveryRepeatsUntilCancelled) {
  LoopRunner runner;
  std::atomic<int> count{0};
  std::promise<void> three;
  TimerId id = runner.run([&] {
    return runner.loop()->run_every(5ms, [&] {
      if (count.fetch_add(1) + 1 == 3) three.set_value();
    });
  });
  ASSERT_EQ(three.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(runner.run([&] { return runner.loop()->cancel(id); }));
  int after_cancel = count.load();
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(count.load(), after_cancel);
}

TEST(EventLoop, CancelledTimerNeverFires) {
  LoopRunner runner;
  std::atomic<bool> fired{false};
  std::promise<void> later;
  runner.run([&] {
    TimerId id = runner.loop()->run_after(10ms, [&] { fired = true; });
    EXPECT_TRUE(runner.loop()->cancel(id));
    EXPECT_FALSE(runner.loop()->cancel(id));
    runner.loop()->run_after(40ms, [&] { later.set_value(); });
  });
  ASSERT_EQ(later.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_FALSE(fired.load());
}

TEST(EventLoop, RefreshTimerPostponesItsDeadline) {
  LoopRunner runner;
  std::promise<std::chrono::steady_clock::time_point> fired;
  auto start = std::chrono::steady_clock::now();
  runner.run([&] {
    TimerId id = runner.loop()->run_after(
        10ms, [&] { fired.set_value(std::chrono::steady_clock::now()); });
    EXPECT_TRUE(runner.loop()->refresh_timer(id, 60ms));
  });
  auto future = fired.get_future();
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
  EXPECT_GE(future.get() - start, 59ms);
}

TEST(EventLoop, TimerDeadlineEarlierThanTheArmedOneIsHonoured) {
  LoopRunner runner;
  std::promise<int> first;
  runner.run([&] {
    runner.loop()->run_after(2000ms, [&] { first.set_value(2000); });
    runner.loop()->run_after(10ms, [&] { first.set_value(10); });
  });
  auto future = first.get_future();
  ASSERT_EQ(future.wait_for(1s), std::future_status::ready);
  EXPECT_EQ(future.get(), 10);
}

TEST(EventLoop, QuitFromAnotherThreadStopsTheLoop) {
  std::promise<EventLoop*> created;
  std::promise<void> quit_returned;
  std::thread thread([&] {
    EventLoop loop;
    created.set_value(&loop);
    loop.loop();
    // quit() may still be writing to the loop's eventfd when loop() sees
    // the flag and returns: the loop must outlive the call.
    quit_returned.get_future().wait();
  });
  EventLoop* loop = created.get_future().get();
  std::this_thread::sleep_for(20ms);  // asleep in the kernel by now
  loop->quit();
  quit_returned.set_value();
  thread.join();  // hangs (and the test times out) if quit did not wake the loop
  SUCCEED();
}

TEST(EventLoop, WakeHooksRunWhenTheLoopIsWoken) {
  LoopRunner runner;
  std::atomic<int> hook_runs{0};
  uint64_t id = runner.run([&] { return runner.loop()->add_wake_hook([&] { ++hook_runs; }); });
  runner.loop()->wakeup();
  runner.run([] {});  // queue_in_loop from here wakes the loop as well
  EXPECT_GE(hook_runs.load(), 1);
  runner.run([&] { runner.loop()->remove_wake_hook(id); });
  int before = hook_runs.load();
  runner.loop()->wakeup();
  runner.run([] {});
  EXPECT_EQ(hook_runs.load(), before);
}

TEST(EventLoop, ChannelDestroyedByAnEarlierHandlerInTheSameRoundIsSkipped) {
  // Regression: a stop signal destroyed an Acceptor whose channel was also
  // ready in that round; the loop then called into freed memory (ASan/TSan).
  LoopRunner runner;
  int fds[2] = {::eventfd(1, EFD_NONBLOCK), ::eventfd(1, EFD_NONBLOCK)};  // both readable
  int calls = 0;
  std::unique_ptr<Channel> channels[2];
  runner.run([&] {
    for (int i = 0; i < 2; ++i) {
      channels[i] = std::make_unique<Channel>(runner.loop(), fds[i]);
      channels[i]->set_read_callback([&, i] {
        ++calls;
        // Whichever runs first destroys the other, whose event is pending.
        std::unique_ptr<Channel>& other = channels[1 - i];
        other->remove();
        other.reset();
        channels[i]->remove();
      });
    }
    for (auto& channel : channels) channel->enable_reading();
  });
  runner.run([] {});
  runner.run([&] {
    for (auto& channel : channels) channel.reset();
  });
  EXPECT_EQ(calls, 1);
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(EventLoop, CurrentIsTheLoopOfThisThread) {
  EXPECT_EQ(EventLoop::current(), nullptr);
  {
    EventLoop loop;
    EXPECT_EQ(EventLoop::current(), &loop);
    EXPECT_TRUE(loop.is_in_loop_thread());
  }
  EXPECT_EQ(EventLoop::current(), nullptr);
}

using EventLoopDeathTest = ::testing::Test;

TEST(EventLoopDeathTest, LoopOnlyMethodFromAnotherThreadAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        EventLoop loop;
        std::thread other([&] { loop.run_after(std::chrono::milliseconds(1), [] {}); });
        other.join();
      },
      "belongs to thread [0-9]+, called from thread [0-9]+");
}

TEST(EventLoopDeathTest, SecondLoopOnOneThreadAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        EventLoop first;
        EventLoop second;
      },
      "already has an EventLoop");
}

}  // namespace
}  // namespace tern::net
