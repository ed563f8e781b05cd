#include "base/task_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace tern {
namespace {

using namespace std::chrono_literals;

TEST(TaskPool, RunsWhatIsQueuedBeforeItJoins) {
  std::atomic<int> ran{0};
  {
    TaskPool pool("t", 2, 100);
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(pool.submit([&] { ++ran; }));
  }
  EXPECT_EQ(ran.load(), 50);
}

TEST(TaskPool, ShutdownRunsWhatIsQueuedAndThenRefusesWork) {
  TaskPool pool("t", 2, 100);
  std::atomic<int> ran{0};
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(pool.submit([&ran] { ran.fetch_add(1); }));
  pool.shutdown();
  EXPECT_EQ(ran.load(), 20);
  EXPECT_FALSE(pool.submit([&ran] { ran.fetch_add(1); }));
  pool.shutdown();  // again: nothing to do
  EXPECT_EQ(ran.load(), 20);
}

TEST(TaskPool, RefusesWorkBeyondItsQueue) {
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<bool> started{false};
  TaskPool pool("t", 1, 2);  // last: joined before what its task uses goes
  ASSERT_TRUE(pool.submit([&] {
    started = true;
    gate.wait();
  }));
  while (!started) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(pool.submit([] {}));
  EXPECT_TRUE(pool.submit([] {}));
  EXPECT_FALSE(pool.submit([] {}));
  release.set_value();
}

TEST(TaskPool, DiscardingDropsWhatHasNotStartedAndLetsTheRunningFinish) {
  // A second stop signal: queued work is dropped, the task under way ends.
  std::atomic<int> ran{0};
  std::atomic<bool> running_done{false};
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<bool> started{false};
  TaskPool pool("t", 1, 100);  // last: joined before what its task uses goes
  ASSERT_TRUE(pool.submit([&] {
    started = true;
    gate.wait();
    running_done = true;
  }));
  while (!started) std::this_thread::sleep_for(1ms);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(pool.submit([&] { ++ran; }));
  EXPECT_EQ(pool.discard_queued(), 20u);
  EXPECT_FALSE(pool.submit([&] { ++ran; })) << "a stopping pool takes no more work";
  release.set_value();
  while (!running_done) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(ran.load(), 0);
}

}  // namespace
}  // namespace tern
