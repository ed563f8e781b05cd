// TimerWheel against the two usual alternatives, on the same workloads:
//
//   std::set    muduo's TimerQueue: an ordered set of (deadline, sequence)
//               plus a hash map from id to set iterator for cancel.
//   std::priority_queue
//               a binary heap with lazy cancellation: cancel inserts the id
//               into a cancelled-set, and pops skip ids found there. A heap
//               cannot move an entry, so refresh is cancel + add.
//
// Each workload uses 100,000 timers with pseudo-random deadlines in
// [now+1, now+60000], precomputed outside the timed region with a fixed seed,
// and the same callback type (std::function<void()> holding a small lambda).
//
//   add+cancel  add all, then cancel all in a shuffled order. For the heap
//               the dead entries are popped too (by advancing past them):
//               lazy cancellation only postpones that work.
//   refresh     add all, then move each to a later deadline three times
//               (std::set: erase + insert). Clean-up is not timed.
//   expire      add all, then advance past the last deadline so all fire.
//
// This file has its own main(): after the run it prints how many times slower
// each alternative was than the wheel, from the same run.
#include "net/timer_wheel.h"

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <numeric>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace {

using tern::net::TimerId;
using tern::net::TimerWheel;
using Callback = std::function<void()>;

constexpr size_t kTimers = 100'000;
constexpr uint64_t kSpan = 60'000;
constexpr int kRefreshRounds = 3;

// Offsets from "now", fixed across runs and identical for every queue.
struct Workload {
  std::vector<uint64_t> offset;                      // in [1, kSpan]
  std::vector<uint32_t> cancel_order;                // a permutation of ids
  std::vector<std::vector<uint64_t>> refresh_offset;  // each round later than the last
};

Workload make_workload() {
  Workload w;
  std::mt19937_64 rng(42);
  w.offset.resize(kTimers);
  for (auto& o : w.offset) o = 1 + rng() % kSpan;
  w.cancel_order.resize(kTimers);
  std::iota(w.cancel_order.begin(), w.cancel_order.end(), 0u);
  std::shuffle(w.cancel_order.begin(), w.cancel_order.end(), rng);
  std::vector<uint64_t> current = w.offset;
  for (int round = 0; round < kRefreshRounds; ++round) {
    for (auto& o : current) o += 1 + rng() % kSpan;
    w.refresh_offset.push_back(current);
  }
  return w;
}

const Workload& workload() {
  static const Workload w = make_workload();
  return w;
}

// The callback every timer carries: small enough for std::function's inline
// storage, so no queue pays for a heap-allocated closure.
Callback make_callback(uint64_t* sink, uint64_t i) {
  return [sink, i] { *sink += i; };
}

class WheelQueue {
 public:
  using Id = TimerId;
  static constexpr const char* kName = "TimerWheel";
  Id add(uint64_t deadline, Callback cb) { return wheel_.add(deadline, std::move(cb)); }
  void cancel(Id id) { wheel_.cancel(id); }
  Id refresh(Id id, uint64_t deadline) {
    wheel_.refresh(id, deadline);
    return id;
  }
  void advance(uint64_t now) { wheel_.advance(now); }
  uint64_t now() const { return wheel_.now(); }
  size_t size() const { return wheel_.size(); }

 private:
  TimerWheel wheel_{1'000'000};
};

class SetQueue {
 public:
  using Id = uint64_t;
  static constexpr const char* kName = "std::set";
  Id add(uint64_t deadline, Callback cb) {
    const Id id = next_seq_++;
    auto it = timers_.emplace(deadline, id).first;
    active_.emplace(id, Entry{std::move(cb), it});
    return id;
  }
  void cancel(Id id) {
    auto found = active_.find(id);
    if (found == active_.end()) return;
    timers_.erase(found->second.position);
    active_.erase(found);
  }
  Id refresh(Id id, uint64_t deadline) {
    auto found = active_.find(id);
    if (found == active_.end()) return id;
    timers_.erase(found->second.position);
    found->second.position = timers_.emplace(deadline, id).first;
    return id;
  }
  void advance(uint64_t now) {
    now_ = std::max(now_, now);
    while (!timers_.empty() && timers_.begin()->first <= now_) {
      const Id id = timers_.begin()->second;
      timers_.erase(timers_.begin());
      auto found = active_.find(id);
      Callback cb = std::move(found->second.callback);
      active_.erase(found);
      cb();
    }
  }
  uint64_t now() const { return now_; }
  size_t size() const { return active_.size(); }

 private:
  using Set = std::set<std::pair<uint64_t, uint64_t>>;
  struct Entry {
    Callback callback;
    Set::iterator position;
  };
  Set timers_;
  std::unordered_map<Id, Entry> active_;
  uint64_t next_seq_ = 0;
  uint64_t now_ = 1'000'000;
};

class HeapQueue {
 public:
  using Id = uint64_t;
  static constexpr const char* kName = "std::priority_queue";
  Id add(uint64_t deadline, Callback cb) {
    const Id id = next_seq_++;
    heap_.push(Entry{deadline, id, std::move(cb)});
    return id;
  }
  void cancel(Id id) { cancelled_.insert(id); }
  // The entry cannot be reached inside the heap, so the caller supplies the
  // callback again, as code using such a queue would.
  Id refresh(Id id, uint64_t deadline, Callback cb) {
    cancel(id);
    return add(deadline, std::move(cb));
  }
  void advance(uint64_t now) {
    now_ = std::max(now_, now);
    while (!heap_.empty() && heap_.top().deadline <= now_) {
      // top() is const; the entry is about to be popped, so moving its
      // callback out is safe.
      Callback cb = std::move(const_cast<Entry&>(heap_.top()).callback);
      const Id id = heap_.top().id;
      heap_.pop();
      if (cancelled_.erase(id) == 0) cb();
    }
  }
  uint64_t now() const { return now_; }
  size_t size() const { return heap_.size() - cancelled_.size(); }

 private:
  struct Entry {
    uint64_t deadline;
    uint64_t id;
    Callback callback;
    bool operator>(const Entry& o) const {
      return deadline != o.deadline ? deadline > o.deadline : id > o.id;
    }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_;
  std::unordered_set<Id> cancelled_;
  uint64_t next_seq_ = 0;
  uint64_t now_ = 1'000'000;
};

template <typename Q>
typename Q::Id refresh_one(Q& q, typename Q::Id id, uint64_t deadline, uint64_t* sink,
                           uint64_t i) {
  if constexpr (std::is_same_v<Q, HeapQueue>) {
    return q.refresh(id, deadline, make_callback(sink, i));
  } else {
    (void)sink;
    (void)i;
    return q.refresh(id, deadline);
  }
}

template <typename Q>
void add_all(Q& q, std::vector<typename Q::Id>& ids, uint64_t* sink) {
  const auto& w = workload();
  const uint64_t base = q.now();
  for (size_t i = 0; i < kTimers; ++i) ids[i] = q.add(base + w.offset[i], make_callback(sink, i));
}

template <typename Q>
void bm_add_cancel(benchmark::State& state) {
  const auto& w = workload();
  Q q;
  std::vector<typename Q::Id> ids(kTimers);
  uint64_t sink = 0;
  for (auto _ : state) {
    add_all(q, ids, &sink);
    for (uint32_t i : w.cancel_order) q.cancel(ids[i]);
    if constexpr (std::is_same_v<Q, HeapQueue>) q.advance(q.now() + kSpan + 1);
    if (q.size() != 0) state.SkipWithError("timers left after cancel");
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kTimers));
  state.SetLabel("items = timers added and cancelled");
}

template <typename Q>
void bm_refresh(benchmark::State& state) {
  const auto& w = workload();
  Q q;
  std::vector<typename Q::Id> ids(kTimers);
  uint64_t sink = 0;
  for (auto _ : state) {
    const uint64_t base = q.now();
    add_all(q, ids, &sink);
    for (const auto& round : w.refresh_offset) {
      for (size_t i = 0; i < kTimers; ++i) ids[i] = refresh_one(q, ids[i], base + round[i], &sink, i);
    }
    state.PauseTiming();
    q.advance(base + kRefreshRounds * kSpan + kSpan + 1);  // fire everything: empty again
    if (q.size() != 0) state.SkipWithError("timers left after clean-up");
    state.ResumeTiming();
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kTimers));
  state.SetLabel("items = timers added and refreshed 3x");
}

template <typename Q>
void bm_expire(benchmark::State& state) {
  Q q;
  std::vector<typename Q::Id> ids(kTimers);
  uint64_t sink = 0;
  for (auto _ : state) {
    const uint64_t before = sink;
    add_all(q, ids, &sink);
    q.advance(q.now() + kSpan);
    if (q.size() != 0 || sink - before != uint64_t{kTimers} * (kTimers - 1) / 2) {
      state.SkipWithError("not every timer fired exactly once");
    }
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kTimers));
  state.SetLabel("items = timers added and fired");
}

// Records the mean real time per iteration of each benchmark, in seconds,
// while printing as the console reporter does.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  using ConsoleReporter::ConsoleReporter;
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      if (run.error_occurred || run.run_type != Run::RT_Iteration) continue;
      auto& [sum, count] = seconds_[run.run_name.str()];
      sum += run.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(run.time_unit);
      ++count;
    }
  }

  void print_ratios() const {
    for (const char* workload : {"add+cancel", "refresh", "expire"}) {
      const std::string wheel = std::string(workload) + "/" + WheelQueue::kName;
      for (const char* other : {SetQueue::kName, HeapQueue::kName}) {
        const std::string name = std::string(workload) + "/" + other;
        if (!seconds_.contains(wheel) || !seconds_.contains(name)) continue;
        std::printf("ratio %s %s / TimerWheel = %.1fx\n", workload, other,
                    mean(name) / mean(wheel));
      }
    }
  }

 private:
  double mean(const std::string& name) const {
    const auto& [sum, count] = seconds_.at(name);
    return sum / count;
  }
  std::map<std::string, std::pair<double, int>> seconds_;
};

// Each workload runs on the three queues back to back, so that a ratio
// compares runs made close together in time.
template <template <typename> class Bench>
void register_workload(const std::string& workload) {
  benchmark::RegisterBenchmark((workload + "/" + WheelQueue::kName).c_str(), Bench<WheelQueue>::run)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark((workload + "/" + SetQueue::kName).c_str(), Bench<SetQueue>::run)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark((workload + "/" + HeapQueue::kName).c_str(), Bench<HeapQueue>::run)
      ->Unit(benchmark::kMillisecond);
}

template <typename Q>
struct AddCancel {
  static void run(benchmark::State& state) { bm_add_cancel<Q>(state); }
};
template <typename Q>
struct Refresh {
  static void run(benchmark::State& state) { bm_refresh<Q>(state); }
};
template <typename Q>
struct Expire {
  static void run(benchmark::State& state) { bm_expire<Q>(state); }
};

}  // namespace

// net_bench's main (buffer_bench.cc registers its benchmarks statically), so
// the binary must not also link benchmark::benchmark_main.
int main(int argc, char** argv) {
  register_workload<AddCancel>("add+cancel");
  register_workload<Refresh>("refresh");
  register_workload<Expire>("expire");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter(::isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_ColorTabular
                                                : benchmark::ConsoleReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  reporter.print_ratios();
  return 0;
}
