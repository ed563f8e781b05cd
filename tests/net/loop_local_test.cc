#include "net/loop_local.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "support/loop_runner.h"

namespace tern::net {
namespace {

using tern::testing::LoopRunner;

struct Counter {
  explicit Counter(int v, std::atomic<int>* alive = nullptr) : value(v), alive_(alive) {
    if (alive_) ++*alive_;
  }
  ~Counter() {
    if (alive_) --*alive_;
  }
  int value;
  std::atomic<int>* alive_;
};

TEST(LoopLocal, EachLoopFindsItsOwn) {
  LoopRunner a, b;
  LoopLocal<Counter> local;
  a.run([&] { local.emplace(a.loop(), 1); });
  b.run([&] { local.emplace(b.loop(), 2); });
  EXPECT_EQ(a.run([&] { return local.current()->value; }), 1);
  EXPECT_EQ(b.run([&] { return local.get(b.loop())->value; }), 2);
  std::set<int> seen;
  local.for_each([&](EventLoop*, Counter& c) { seen.insert(c.value); });
  EXPECT_EQ(seen, (std::set<int>{1, 2}));
}

TEST(LoopLocal, TwoOfThemDoNotShareSlots) {
  LoopRunner a;
  LoopLocal<Counter> first, second;
  a.run([&] {
    first.emplace(a.loop(), 10);
    EXPECT_EQ(second.get(a.loop()), nullptr);
    second.emplace(a.loop(), 20);
  });
  EXPECT_EQ(a.run([&] { return first.current()->value + second.current()->value; }), 30);
}

TEST(LoopLocal, ReplacingDestroysTheOldOneOnItsLoop) {
  std::atomic<int> alive{0};
  LoopRunner a;
  {
    LoopLocal<Counter> local;
    a.run([&] { local.emplace(a.loop(), 1, &alive); });
    EXPECT_EQ(alive.load(), 1);
    a.run([&] { local.emplace(a.loop(), 2, &alive); });
    EXPECT_EQ(alive.load(), 1) << "the replaced one was destroyed";
    EXPECT_EQ(a.run([&] { return local.current()->value; }), 2);
  }
  EXPECT_EQ(alive.load(), 0) << "the LoopLocal owns what it holds";
}

TEST(LoopLocal, NothingOnALoopThatHasNone) {
  LoopRunner a;
  LoopLocal<Counter> local;
  EXPECT_EQ(a.run([&] { return local.current(); }), nullptr);
}

}  // namespace
}  // namespace tern::net
