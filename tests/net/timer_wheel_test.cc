#include "net/timer_wheel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <vector>

namespace tern::net {
namespace {

constexpr uint64_t k8 = uint64_t{1} << 8;
constexpr uint64_t k16 = uint64_t{1} << 16;
constexpr uint64_t k24 = uint64_t{1} << 24;
constexpr uint64_t k32 = uint64_t{1} << 32;

struct Fired {
  int id;
  uint64_t tick;  // wheel.now() inside the callback
  friend bool operator==(const Fired&, const Fired&) = default;
};

// Records which timer fired at which tick. The wheel is driven by plain
// numbers passed to advance(): a fake clock.
class Recorder {
 public:
  explicit Recorder(TimerWheel& wheel) : wheel_(wheel) {}
  TimerWheel::Callback cb(int id) {
    return [this, id] { fired.push_back({id, wheel_.now()}); };
  }
  TimerId add(int id, uint64_t expire, uint64_t interval = 0) {
    return wheel_.add(expire, cb(id), interval);
  }
  std::vector<uint64_t> ticks_of(int id) const {
    std::vector<uint64_t> t;
    for (const auto& f : fired)
      if (f.id == id) t.push_back(f.tick);
    return t;
  }
  std::vector<Fired> fired;

 private:
  TimerWheel& wheel_;
};

TEST(TimerWheel, EmptyWheelHasNoWakeupAndAdvancesTime) {
  TimerWheel w(5);
  EXPECT_EQ(w.size(), 0u);
  EXPECT_EQ(w.next_wakeup(), std::nullopt);
  w.advance(1'000'000);
  EXPECT_EQ(w.now(), 1'000'000u);
  w.advance(10);  // going back is a no-op
  EXPECT_EQ(w.now(), 1'000'000u);
}

TEST(TimerWheel, FiresAtItsDeadlineAndNotBefore) {
  TimerWheel w;
  Recorder r(w);
  r.add(1, 10);
  w.advance(9);
  EXPECT_TRUE(r.fired.empty());
  w.advance(10);
  EXPECT_EQ(r.fired, (std::vector<Fired>{{1, 10}}));
  w.advance(1000);
  EXPECT_EQ(r.fired.size(), 1u);
  EXPECT_EQ(w.size(), 0u);
}

TEST(TimerWheel, RandomDeadlinesOnAllLevelsFireOnceInOrderAtFirstAdvancePastThem) {
  TimerWheel w;
  Recorder r(w);
  std::mt19937_64 rng(20240601);
  std::vector<uint64_t> deadline;
  for (uint64_t d : {uint64_t{1}, k8 - 1, k8, k8 + 1, k16 - 1, k16, k16 + 1, k24 - 1, k24,
                     k24 + 1, 3 * k24 + 5}) {
    deadline.push_back(d);
  }
  const uint64_t spans[] = {k8, k16, k24, 4 * k24};
  for (int i = 0; i < 3000; ++i) {
    deadline.push_back(1 + rng() % spans[static_cast<size_t>(i) % 4]);
  }
  for (size_t i = 0; i < deadline.size(); ++i) r.add(static_cast<int>(i), deadline[i]);
  EXPECT_EQ(w.size(), deadline.size());

  const uint64_t last = *std::max_element(deadline.begin(), deadline.end());
  std::vector<int64_t> step_of(deadline.size(), -1);  // which advance() fired it
  std::vector<uint64_t> targets = {0};
  while (w.now() < last) {
    const uint64_t bits = rng() % 23;  // steps from 1 tick to 4M ticks
    const uint64_t step = 1 + rng() % (uint64_t{1} << bits);
    const size_t before = r.fired.size();
    targets.push_back(w.now() + step);
    w.advance(targets.back());
    for (size_t i = before; i < r.fired.size(); ++i)
      step_of[static_cast<size_t>(r.fired[i].id)] = static_cast<int64_t>(targets.size() - 1);
  }

  ASSERT_EQ(r.fired.size(), deadline.size());
  EXPECT_EQ(w.size(), 0u);
  for (size_t i = 1; i < r.fired.size(); ++i) {
    ASSERT_LE(r.fired[i - 1].tick, r.fired[i].tick) << "out of order at " << i;
  }
  for (const auto& f : r.fired) {
    const auto id = static_cast<size_t>(f.id);
    ASSERT_EQ(f.tick, deadline[id]) << "timer " << id;
    const auto s = static_cast<size_t>(step_of[id]);
    ASSERT_GE(s, 1u);
    EXPECT_LT(targets[s - 1], deadline[id]) << "fired late: an earlier advance reached it";
    EXPECT_GE(targets[s], deadline[id]);
  }
  std::vector<int> ids;
  for (const auto& f : r.fired) ids.push_back(f.id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end()) << "a timer fired twice";
}

TEST(TimerWheel, DeadlineInThePastOrNowFiresAtTheNextTick) {
  TimerWheel w(100);
  Recorder r(w);
  r.add(1, 0);
  r.add(2, 99);
  r.add(3, 100);
  w.advance(100);
  EXPECT_TRUE(r.fired.empty());
  w.advance(101);
  ASSERT_EQ(r.fired.size(), 3u);
  for (const auto& f : r.fired) EXPECT_EQ(f.tick, 101u);
}

TEST(TimerWheel, CancelledTimerNeverFires) {
  TimerWheel w;
  Recorder r(w);
  TimerId a = r.add(1, 50);
  TimerId b = r.add(2, 70000);
  EXPECT_TRUE(w.pending(a));
  EXPECT_TRUE(w.cancel(a));
  EXPECT_FALSE(w.pending(a));
  EXPECT_FALSE(w.cancel(a));
  EXPECT_TRUE(w.cancel(b));
  EXPECT_EQ(w.size(), 0u);
  EXPECT_EQ(w.next_wakeup(), std::nullopt);
  w.advance(100000);
  EXPECT_TRUE(r.fired.empty());
}

TEST(TimerWheel, CancelOfFiredOneShotReturnsFalse) {
  TimerWheel w;
  Recorder r(w);
  TimerId a = r.add(1, 5);
  w.advance(5);
  ASSERT_EQ(r.fired.size(), 1u);
  EXPECT_FALSE(w.pending(a));
  EXPECT_FALSE(w.cancel(a));
  EXPECT_FALSE(w.refresh(a, 50));
  EXPECT_FALSE(TimerId{}.valid());
  EXPECT_FALSE(w.cancel(TimerId{}));
}

TEST(TimerWheel, StaleIdDoesNotTouchTheTimerThatReusedItsSlot) {
  TimerWheel w;
  Recorder r(w);
  TimerId old_cancelled = r.add(1, 10);
  ASSERT_TRUE(w.cancel(old_cancelled));
  TimerId reused = r.add(2, 20);
  ASSERT_EQ(reused.index, old_cancelled.index) << "test expects the free slot to be reused";
  EXPECT_NE(reused.generation, old_cancelled.generation);
  EXPECT_FALSE(w.cancel(old_cancelled));
  EXPECT_FALSE(w.refresh(old_cancelled, 500));
  EXPECT_FALSE(w.pending(old_cancelled));
  EXPECT_TRUE(w.pending(reused));

  w.advance(20);
  TimerId old_fired = reused;
  TimerId reused_again = r.add(3, 30);
  ASSERT_EQ(reused_again.index, old_fired.index);
  EXPECT_FALSE(w.cancel(old_fired));
  w.advance(30);
  EXPECT_EQ(r.fired, (std::vector<Fired>{{2, 20}, {3, 30}}));
}

TEST(TimerWheel, RefreshMovesTimerLaterAndEarlierAcrossLevels) {
  TimerWheel w;
  Recorder r(w);
  TimerId later = r.add(1, 100);
  EXPECT_TRUE(w.refresh(later, 500));         // level 0 -> level 1
  TimerId earlier = r.add(2, 3 * k16 + 7);    // level 2
  EXPECT_TRUE(w.refresh(earlier, 40));        // level 2 -> level 0
  TimerId there_and_back = r.add(3, 60);      // level 0
  EXPECT_TRUE(w.refresh(there_and_back, 2 * k16));  // -> level 2
  EXPECT_TRUE(w.refresh(there_and_back, 80));       // -> level 0 again
  w.advance(3 * k16 + 10);
  EXPECT_EQ(r.fired, (std::vector<Fired>{{2, 40}, {3, 80}, {1, 500}}));
}

TEST(TimerWheel, RefreshAcrossCascadeBoundaryFiresAtNewDeadline) {
  TimerWheel w(250);
  Recorder r(w);
  TimerId a = r.add(1, 1000);  // level 1
  w.advance(255);
  EXPECT_TRUE(w.refresh(a, 256));  // still level 1, the slot cascaded at 256
  TimerId b = r.add(2, 255 + 300);
  w.advance(256);
  EXPECT_EQ(r.fired, (std::vector<Fired>{{1, 256}}));
  EXPECT_TRUE(w.refresh(b, 300));  // level 1 -> level 0 of the block that just began
  w.advance(k16 - 1);
  EXPECT_EQ(r.ticks_of(2), (std::vector<uint64_t>{300}));

  // now = 65535: the next tick starts a new level-1 block.
  TimerId c = r.add(3, 5 * k16);   // level 2
  TimerId d = r.add(4, k16 + 10);  // level 2 slot 1
  EXPECT_TRUE(w.refresh(c, k16));  // due exactly at the boundary
  w.advance(k16);
  EXPECT_EQ(r.ticks_of(3), (std::vector<uint64_t>{k16}));
  EXPECT_TRUE(w.refresh(d, k16 + 300));  // cascaded to level 0; now in level 1
  w.advance(k16 + 299);
  EXPECT_TRUE(r.ticks_of(4).empty());
  w.advance(k16 + 300);
  EXPECT_EQ(r.ticks_of(4), (std::vector<uint64_t>{k16 + 300}));
}

TEST(TimerWheel, RefreshToThePastFiresAtTheNextTick) {
  TimerWheel w(1000);
  Recorder r(w);
  TimerId a = r.add(1, 5000);
  EXPECT_TRUE(w.refresh(a, 3));
  w.advance(1001);
  EXPECT_EQ(r.fired, (std::vector<Fired>{{1, 1001}}));
}

TEST(TimerWheel, RepeatingTimerFiresEveryIntervalUntilCancelled) {
  TimerWheel w;
  Recorder r(w);
  TimerId t = r.add(1, 10, 7);
  for (uint64_t now = 1; now <= 100; ++now) w.advance(now);
  std::vector<uint64_t> want;
  for (uint64_t tick = 10; tick <= 100; tick += 7) want.push_back(tick);
  EXPECT_EQ(r.ticks_of(1), want);
  EXPECT_TRUE(w.pending(t));
  EXPECT_EQ(w.size(), 1u);
  EXPECT_TRUE(w.cancel(t));
  w.advance(1000);
  EXPECT_EQ(r.ticks_of(1), want);
  EXPECT_EQ(w.size(), 0u);
}

TEST(TimerWheel, RepeatingTimerFiresEveryPeriodWithinOneBigAdvance) {
  TimerWheel w;
  Recorder r(w);
  r.add(1, 300, 300);    // crosses a level-0 block every time
  r.add(2, k16, 70000);  // lives on levels 1 and 2
  w.advance(5 * k16);
  std::vector<uint64_t> want1, want2;
  for (uint64_t t = 300; t <= 5 * k16; t += 300) want1.push_back(t);
  for (uint64_t t = k16; t <= 5 * k16; t += 70000) want2.push_back(t);
  EXPECT_EQ(r.ticks_of(1), want1);
  EXPECT_EQ(r.ticks_of(2), want2);
}

TEST(TimerWheel, CallbackCancellingATimerDueOnTheSameTickStopsIt) {
  TimerWheel w;
  int ran = 0;
  TimerId a, b;
  bool cancel_ok = false;
  a = w.add(50, [&] { ++ran; cancel_ok = w.cancel(b); });
  b = w.add(50, [&] { ++ran; cancel_ok = w.cancel(a); });
  w.advance(50);
  EXPECT_EQ(ran, 1) << "exactly one of two timers that cancel each other runs";
  EXPECT_TRUE(cancel_ok);
  EXPECT_EQ(w.size(), 0u);
}

TEST(TimerWheel, CallbackCancellingALaterTimerStopsIt) {
  TimerWheel w;
  Recorder r(w);
  TimerId later = r.add(2, 40000);
  w.add(10, [&] { EXPECT_TRUE(w.cancel(later)); });
  w.advance(100000);
  EXPECT_TRUE(r.fired.empty());
  EXPECT_EQ(w.size(), 0u);
}

TEST(TimerWheel, RepeatingCallbackCancellingItselfStops) {
  TimerWheel w;
  int runs = 0;
  TimerId self;
  self = w.add(5, [&] {
    if (++runs == 3) {
      EXPECT_TRUE(w.cancel(self));
      EXPECT_FALSE(w.cancel(self));
      EXPECT_FALSE(w.pending(self));
    }
  }, 5);
  w.advance(1000);
  EXPECT_EQ(runs, 3);
  EXPECT_FALSE(w.pending(self));
  EXPECT_EQ(w.size(), 0u);
}

TEST(TimerWheel, CallbackRefreshingItselfRearmsAOneShot) {
  TimerWheel w;
  std::vector<uint64_t> ticks;
  TimerId self;
  self = w.add(10, [&] {
    ticks.push_back(w.now());
    if (ticks.size() < 3) {
      EXPECT_TRUE(w.refresh(self, w.now() + 300));
      EXPECT_TRUE(w.pending(self));
    }
  });
  w.advance(100000);
  EXPECT_EQ(ticks, (std::vector<uint64_t>{10, 310, 610}));
  EXPECT_FALSE(w.pending(self));
  EXPECT_EQ(w.size(), 0u);
}

TEST(TimerWheel, CallbackAddingTimersSchedulesThemForLaterTicks) {
  TimerWheel w;
  Recorder r(w);
  w.add(10, [&] {
    r.add(1, w.now() + 1);
    r.add(2, w.now());  // "now" is already being expired: next tick
    r.add(3, w.now() + 1000);
    EXPECT_EQ(w.size(), 5u);  // the running timer counts until it returns
  });
  w.add(255, [&] { r.add(4, w.now() + 1); });  // across a block boundary
  w.advance(10);
  EXPECT_TRUE(r.fired.empty());
  w.advance(11);
  ASSERT_EQ(r.fired.size(), 2u);
  w.advance(2000);
  EXPECT_EQ(r.ticks_of(1), (std::vector<uint64_t>{11}));
  EXPECT_EQ(r.ticks_of(2), (std::vector<uint64_t>{11}));
  EXPECT_EQ(r.ticks_of(4), (std::vector<uint64_t>{256}));
  EXPECT_EQ(r.ticks_of(3), (std::vector<uint64_t>{1010}));
}

TEST(TimerWheel, ManyTimersAddedFromCallbacksSurviveNodeReallocation) {
  TimerWheel w;
  Recorder r(w);
  w.add(1, [&] {
    for (int i = 0; i < 1000; ++i) r.add(i, w.now() + 1 + static_cast<uint64_t>(i));
  });
  w.advance(2000);
  EXPECT_EQ(r.fired.size(), 1000u);
}

TEST(TimerWheel, NextWakeupIsExactWithinTheCurrentBlock) {
  TimerWheel w(1000);  // block [768, 1024)
  TimerId a = w.add(1020, [] {});
  EXPECT_EQ(w.next_wakeup(), 1020u);
  w.add(1001, [] {});
  EXPECT_EQ(w.next_wakeup(), 1001u);
  w.advance(1001);
  EXPECT_EQ(w.next_wakeup(), 1020u);
  EXPECT_TRUE(w.cancel(a));
  EXPECT_EQ(w.next_wakeup(), std::nullopt);
}

TEST(TimerWheel, PushedBackTimerIsMovedAtItsOldSlotAndFiresAtItsNewDeadline) {
  TimerWheel w(0);
  int fired = 0;
  uint64_t fired_at = 0;
  TimerId id = w.add(100, [&] { ++fired, fired_at = w.now(); });
  // Pushed back many times, as an idle timeout on every request: each push
  // only stores the deadline.
  for (uint64_t d = 101; d <= 200; ++d) ASSERT_TRUE(w.refresh(id, d));
  EXPECT_EQ(w.next_wakeup(), 100u);  // the old slot: one early wake-up
  w.advance(100);
  EXPECT_EQ(fired, 0);
  EXPECT_TRUE(w.pending(id));
  EXPECT_EQ(w.next_wakeup(), 200u);  // placed again by its deadline
  w.advance(199);
  EXPECT_EQ(fired, 0);
  w.advance(200);
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(fired_at, 200u);
  EXPECT_EQ(w.size(), 0u);
}

TEST(TimerWheel, PulledForwardTimerIsMovedAtOnce) {
  TimerWheel w(0);
  int fired = 0;
  TimerId id = w.add(70'000, [&] { ++fired; });  // level 1
  ASSERT_TRUE(w.refresh(id, 30));
  EXPECT_EQ(w.next_wakeup(), 30u);
  w.advance(29);
  EXPECT_EQ(fired, 0);
  w.advance(30);
  EXPECT_EQ(fired, 1);
}

TEST(TimerWheel, PushedBackTimerCanBeCancelledAndPulledForwardAgain) {
  TimerWheel w(0);
  int a = 0, b = 0;
  TimerId first = w.add(50, [&] { ++a; });
  TimerId second = w.add(50, [&] { ++b; });
  ASSERT_TRUE(w.refresh(first, 5'000));
  ASSERT_TRUE(w.refresh(second, 5'000));
  ASSERT_TRUE(w.cancel(first));        // still sitting in slot 50
  ASSERT_TRUE(w.refresh(second, 20));  // earlier than its slot: moved now
  w.advance(20);
  EXPECT_EQ(b, 1);
  w.advance(10'000);
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(w.size(), 0u);
}

TEST(TimerWheel, NextWakeupBeyondTheBlockIsNotAfterTheEarliestDeadline) {
  for (uint64_t deadline : {uint64_t{256}, uint64_t{1000}, k16, k16 + 12345, k24 + 1, k32 + 99}) {
    TimerWheel w(10);
    w.add(deadline, [] {});
    auto next = w.next_wakeup();
    ASSERT_TRUE(next.has_value()) << deadline;
    EXPECT_GT(*next, 10u) << deadline;
    EXPECT_LE(*next, deadline) << deadline;
  }
}

TEST(TimerWheel, DrivingOnlyByNextWakeupFiresEveryTimerOnTime) {
  TimerWheel w(7);
  Recorder r(w);
  std::mt19937_64 rng(99);
  std::multimap<uint64_t, int> due;
  for (int i = 0; i < 500; ++i) {
    const uint64_t bits = rng() % 31;
    const uint64_t d = 8 + rng() % (uint64_t{1} << bits);
    r.add(i, d);
    due.emplace(d, i);
  }
  r.add(1000, k32 + 4242);  // overflow list
  due.emplace(k32 + 4242, 1000);

  int calls = 0;
  while (auto next = w.next_wakeup()) {
    ASSERT_GT(*next, w.now());
    ASSERT_LE(*next, due.begin()->first) << "would skip past a deadline";
    if ((due.begin()->first >> 8) == (w.now() >> 8)) {
      ASSERT_EQ(*next, due.begin()->first);
    }
    const size_t before = r.fired.size();
    w.advance(*next);
    for (size_t i = before; i < r.fired.size(); ++i) {
      auto it = due.find(r.fired[i].tick);
      ASSERT_NE(it, due.end()) << "timer " << r.fired[i].id << " fired at a wrong tick";
      due.erase(it);
    }
    ASSERT_LT(++calls, 10000);
  }
  EXPECT_TRUE(due.empty());
  EXPECT_EQ(r.fired.size(), 501u);
  EXPECT_EQ(r.ticks_of(1000), (std::vector<uint64_t>{k32 + 4242}));
}

TEST(TimerWheel, TimerInTheNextTopLevelBlockFiresAfterOverflowCascade) {
  TimerWheel w(k32 - 10);
  Recorder r(w);
  r.add(1, k32 + 5);  // only 15 ticks away, but past the 2^32 block
  r.add(2, k32);
  w.advance(k32 - 1);
  EXPECT_TRUE(r.fired.empty());
  w.advance(k32 + 5);
  EXPECT_EQ(r.fired, (std::vector<Fired>{{2, k32}, {1, k32 + 5}}));
}

TEST(TimerWheel, TimerMoreThanTwoToThe32TicksAwayFiresAtItsDeadline) {
  TimerWheel w;
  Recorder r(w);
  const uint64_t far = k32 + 3 * k24 + 17;
  r.add(1, far);
  r.add(2, 2 * k32 + 1);
  w.advance(far - 1);
  EXPECT_TRUE(r.fired.empty());
  w.advance(far);
  EXPECT_EQ(r.fired, (std::vector<Fired>{{1, far}}));
  EXPECT_EQ(w.size(), 1u);
}

TEST(TimerWheel, SizeCountsPendingTimers) {
  TimerWheel w;
  TimerId a = w.add(10, [] {});
  w.add(20, [] {});
  TimerId rep = w.add(5, [] {}, 5);
  EXPECT_EQ(w.size(), 3u);
  EXPECT_TRUE(w.cancel(a));
  EXPECT_EQ(w.size(), 2u);
  w.advance(25);  // the one-shot at 20 fires, the repeating one stays
  EXPECT_EQ(w.size(), 1u);
  EXPECT_TRUE(w.cancel(rep));
  EXPECT_EQ(w.size(), 0u);
}

// Random add/cancel/refresh/advance against a plain ordered map.
TEST(TimerWheel, AFunctionTimerRunsOnceAndMayRearmOrCancelItself) {
  TimerWheel w(0);
  struct Probe {
    TimerWheel* wheel;
    TimerId id;
    std::vector<uint64_t> ticks;
    int rearms = 0;
  } probe{&w, {}, {}, 0};
  auto fire = [](void* arg) {
    auto* p = static_cast<Probe*>(arg);
    p->ticks.push_back(p->wheel->now());
    if (p->rearms-- > 0) {
      EXPECT_TRUE(p->wheel->refresh(p->id, p->wheel->now() + 10));
    }
  };
  probe.rearms = 2;
  probe.id = w.add(5, fire, &probe);
  EXPECT_TRUE(w.pending(probe.id));
  w.advance(100);
  EXPECT_EQ(probe.ticks, (std::vector<uint64_t>{5, 15, 25}));
  EXPECT_FALSE(w.pending(probe.id));
  EXPECT_FALSE(w.cancel(probe.id));
  EXPECT_EQ(w.size(), 0u);
  // Cancelled before its tick, it never runs; its node serves the next timer.
  probe.ticks.clear();
  probe.rearms = 0;
  const TimerId cancelled = w.add(150, fire, &probe);
  EXPECT_TRUE(w.cancel(cancelled));
  const TimerId next = w.add(160, fire, &probe);
  EXPECT_EQ(next.index, cancelled.index);
  EXPECT_FALSE(w.pending(cancelled));
  w.advance(200);
  EXPECT_EQ(probe.ticks, (std::vector<uint64_t>{160}));
}

TEST(TimerWheel, MatchesReferenceModelUnderRandomOperations) {
  // Half the timers are function timers (fn, arg), half std::functions:
  // both kinds share the nodes and the lists.
  TimerWheel w(12345);
  std::mt19937_64 rng(7);
  std::vector<TimerId> ids;
  std::map<int, uint64_t> live;  // id -> deadline
  std::vector<Fired> fired;
  struct Context {
    std::vector<Fired>* fired;
    TimerWheel* wheel;
    int id;
  };
  std::deque<Context> contexts;  // stable addresses
  auto fire = [](void* arg) {
    auto* c = static_cast<Context*>(arg);
    c->fired->push_back({c->id, c->wheel->now()});
  };
  auto random_delay = [&] {
    static constexpr uint64_t kSpans[] = {k8, k16, uint64_t{1} << 22, uint64_t{1} << 25};
    const uint64_t span = kSpans[rng() % 4];
    return rng() % span;
  };
  auto random_live = [&] {
    auto it = live.begin();
    std::advance(it, static_cast<long>(rng() % live.size()));
    return it->first;
  };
  for (int op = 0; op < 4000; ++op) {
    const uint64_t now = w.now();
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 4) {  // add
      const int id = static_cast<int>(ids.size());
      const uint64_t d = now - std::min(now, uint64_t{3}) + random_delay();
      if (rng() % 2) {
        ids.push_back(w.add(d, [&fired, &w, id] { fired.push_back({id, w.now()}); }));
      } else {
        contexts.push_back({&fired, &w, id});
        ids.push_back(w.add(d, fire, &contexts.back()));
      }
      live[id] = std::max(d, now + 1);
    } else if (kind < 5 && !ids.empty()) {  // cancel, live or not
      const int id = rng() % 2 && !live.empty() ? random_live()
                                                : static_cast<int>(rng() % ids.size());
      ASSERT_EQ(w.cancel(ids[static_cast<size_t>(id)]), live.erase(id) == 1) << "op " << op;
    } else if (kind < 7 && !live.empty()) {  // refresh
      const int id = random_live();
      const uint64_t d = now + random_delay();
      ASSERT_TRUE(w.refresh(ids[static_cast<size_t>(id)], d));
      live[id] = std::max(d, now + 1);
    } else {  // advance
      const uint64_t to = now + random_delay();
      std::multimap<uint64_t, int> expect;
      for (auto [id, d] : live)
        if (d <= to) expect.emplace(d, id);
      fired.clear();
      w.advance(to);
      ASSERT_EQ(fired.size(), expect.size()) << "op " << op;
      auto it = expect.begin();
      for (size_t i = 0; i < fired.size(); ++i, ++it) {
        ASSERT_EQ(fired[i].tick, it->first) << "op " << op;  // tick order, exact tick
        ASSERT_EQ(live.at(fired[i].id), fired[i].tick) << "op " << op;
        live.erase(fired[i].id);
      }
    }
    ASSERT_EQ(w.size(), live.size()) << "op " << op;
    auto next = w.next_wakeup();
    ASSERT_EQ(next.has_value(), !live.empty()) << "op " << op;
    if (next) {
      uint64_t earliest = UINT64_MAX;
      for (auto [id, d] : live) earliest = std::min(earliest, d);
      ASSERT_GT(*next, w.now());
      // Never late. It may be early: a timer pushed back since it was placed
      // still sits in the slot of its old deadline (the tick order and exact
      // ticks of what fires are checked above).
      ASSERT_LE(*next, earliest) << "op " << op;
    }
  }
  for (auto [id, d] : live) EXPECT_TRUE(w.pending(ids[static_cast<size_t>(id)]));
}

}  // namespace
}  // namespace tern::net
