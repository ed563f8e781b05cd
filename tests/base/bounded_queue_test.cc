#include "base/bounded_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace tern {
namespace {

TEST(BoundedQueue, CapacityRoundsUpToPowerOfTwo) {
  EXPECT_EQ(BoundedQueue<int>(0).capacity(), 2u);
  EXPECT_EQ(BoundedQueue<int>(1).capacity(), 2u);
  EXPECT_EQ(BoundedQueue<int>(2).capacity(), 2u);
  EXPECT_EQ(BoundedQueue<int>(3).capacity(), 4u);
  EXPECT_EQ(BoundedQueue<int>(5).capacity(), 8u);
  EXPECT_EQ(BoundedQueue<int>(1000).capacity(), 1024u);
  EXPECT_EQ(BoundedQueue<int>(1024).capacity(), 1024u);
  EXPECT_EQ(BoundedQueue<int>(1025).capacity(), 2048u);
}

TEST(BoundedQueue, PopFromEmptyQueueReturnsFalseAndLeavesOutputAlone) {
  BoundedQueue<int> q(4);
  int out = 17;
  EXPECT_FALSE(q.try_pop(out));
  EXPECT_EQ(out, 17);
}

TEST(BoundedQueue, PushToFullQueueReturnsFalse) {
  BoundedQueue<int> q(4);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(q.try_push(i)) << i;
  EXPECT_FALSE(q.try_push(99));
  int out = -1;
  ASSERT_TRUE(q.try_pop(out));
  EXPECT_EQ(out, 0);
  EXPECT_TRUE(q.try_push(4));  // one slot freed
  EXPECT_FALSE(q.try_push(5));
}

TEST(BoundedQueue, SingleThreadIsFifo) {
  BoundedQueue<int> q(8);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(q.try_push(i));
  for (int i = 0; i < 8; ++i) {
    int out = -1;
    ASSERT_TRUE(q.try_pop(out));
    EXPECT_EQ(out, i);
  }
  int out = -1;
  EXPECT_FALSE(q.try_pop(out));
}

TEST(BoundedQueue, StaysFifoAcrossManyWrapArounds) {
  BoundedQueue<int> q(4);
  int next_push = 0;
  int next_pop = 0;
  // Interleave pushes and pops so the positions wrap the 4 cells many times
  // with the queue at every fill level.
  for (int round = 0; round < 1000; ++round) {
    const int pushes = 1 + round % 4;
    for (int i = 0; i < pushes; ++i) {
      if (!q.try_push(next_push)) break;
      ++next_push;
    }
    const int pops = 1 + (round * 7) % 4;
    for (int i = 0; i < pops; ++i) {
      int out = -1;
      if (!q.try_pop(out)) break;
      ASSERT_EQ(out, next_pop);
      ++next_pop;
    }
  }
  int out = -1;
  while (q.try_pop(out)) ASSERT_EQ(out, next_pop++);
  EXPECT_EQ(next_pop, next_push);
  EXPECT_GT(next_push, 1000);
}

TEST(BoundedQueue, MovesMoveOnlyValues) {
  BoundedQueue<std::unique_ptr<std::string>> q(2);
  ASSERT_TRUE(q.try_push(std::make_unique<std::string>("a")));
  ASSERT_TRUE(q.try_push(std::make_unique<std::string>("b")));
  EXPECT_FALSE(q.try_push(std::make_unique<std::string>("c")));
  std::unique_ptr<std::string> out;
  ASSERT_TRUE(q.try_pop(out));
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(*out, "a");
  ASSERT_TRUE(q.try_pop(out));
  EXPECT_EQ(*out, "b");
}

// 4 producers push kPerProducer distinct items each; 2 consumers pop until
// all have been seen. Every item must arrive exactly once, and each consumer
// must see each producer's items in the order they were pushed.
TEST(BoundedQueue, ManyProducersManyConsumersDeliverEveryItemExactlyOnce) {
  constexpr int kProducers = 4;
  constexpr int kConsumers = 2;
  constexpr uint64_t kPerProducer = 100'000;
  constexpr uint64_t kTotal = kProducers * kPerProducer;

  BoundedQueue<uint64_t> q(1024);
  std::atomic<uint64_t> consumed{0};
  struct Received {
    std::vector<uint64_t> items;
    uint64_t sum = 0;
    bool in_order = true;
  };
  std::vector<Received> received(kConsumers);  // one per consumer thread

  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&q, p] {
      for (uint64_t i = 0; i < kPerProducer; ++i) {
        const uint64_t item = static_cast<uint64_t>(p) * kPerProducer + i;
        while (!q.try_push(item)) std::this_thread::yield();
      }
    });
  }
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&, c] {
      std::vector<int64_t> last(kProducers, -1);
      Received& mine = received[static_cast<size_t>(c)];
      mine.items.reserve(kTotal);
      while (consumed.load(std::memory_order_relaxed) < kTotal) {
        uint64_t item;
        if (!q.try_pop(item)) {
          std::this_thread::yield();
          continue;
        }
        consumed.fetch_add(1, std::memory_order_relaxed);
        const auto producer = static_cast<size_t>(item / kPerProducer);
        const auto seq = static_cast<int64_t>(item % kPerProducer);
        if (producer >= kProducers || seq <= last[producer]) mine.in_order = false;
        if (producer < kProducers) last[producer] = seq;
        mine.sum += item;
        mine.items.push_back(item);
      }
    });
  }
  for (auto& t : threads) t.join();

  std::vector<uint8_t> seen(kTotal, 0);
  uint64_t count = 0;
  uint64_t sum = 0;
  for (int c = 0; c < kConsumers; ++c) {
    const Received& r = received[static_cast<size_t>(c)];
    EXPECT_TRUE(r.in_order) << "consumer " << c << " saw a producer's items out of order";
    sum += r.sum;
    for (uint64_t item : r.items) {
      ASSERT_LT(item, kTotal);
      ASSERT_EQ(seen[item], 0) << "item " << item << " received twice";
      seen[item] = 1;
      ++count;
    }
  }
  EXPECT_EQ(count, kTotal);
  EXPECT_EQ(sum, kTotal * (kTotal - 1) / 2);
  uint64_t leftover;
  EXPECT_FALSE(q.try_pop(leftover));
}

}  // namespace
}  // namespace tern
