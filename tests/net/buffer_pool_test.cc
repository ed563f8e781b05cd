#include "net/buffer_pool.h"


#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tern::net {
namespace {

// The storage a buffer writes into, to tell one allocation from another.
const char* storage_of(const Buffer& buffer) { return buffer.peek() - buffer.prependable_bytes(); }

TEST(BufferPoolTest, AnEmptyBufferGetsFreshStorageAndABufferWithStorageKeepsIt) {
  BufferPool pool;
  Buffer buffer(0);
  pool.fill(buffer);
  EXPECT_EQ(buffer.capacity(), BufferPool::kFreshCapacity);

  Buffer full(0);
  full.append("x", 1);
  const size_t capacity = full.capacity();
  const char* before = storage_of(full);
  pool.fill(full);
  EXPECT_EQ(full.capacity(), capacity);
  EXPECT_EQ(storage_of(full), before);
  EXPECT_EQ(full.readable_bytes(), 1u);
}

TEST(BufferPoolTest, DrainedStorageGoesToTheNextBufferFilled) {
  BufferPool pool;
  Buffer first(0);
  pool.fill(first);
  const char* storage = storage_of(first);
  pool.drain(first);
  EXPECT_EQ(first.capacity(), 0u);
  EXPECT_EQ(pool.pooled(), 1u);
  EXPECT_EQ(pool.pooled_bytes(), BufferPool::kFreshCapacity);

  Buffer second(0);
  pool.fill(second);
  EXPECT_EQ(storage_of(second), storage);
  EXPECT_EQ(pool.pooled(), 0u);
  EXPECT_EQ(pool.pooled_bytes(), 0u);
}

TEST(BufferPoolTest, ABufferWithBytesIsNotDrained) {
  BufferPool pool;
  Buffer buffer(0);
  pool.fill(buffer);
  buffer.append("abc", 3);
  pool.drain(buffer);
  EXPECT_EQ(buffer.capacity(), BufferPool::kFreshCapacity);
  EXPECT_EQ(std::string(buffer.peek(), buffer.readable_bytes()), "abc");
  EXPECT_EQ(pool.pooled(), 0u);
}

TEST(BufferPoolTest, StorageGrownToFitAFewBytesIsFreedNotPooled) {
  // A buffer that grew from nothing for one small write: pooled, it would go
  // to the next connection's input and be grown again there.
  BufferPool pool;
  Buffer small(0);
  small.ensure_writable(100);
  ASSERT_LT(small.capacity(), BufferPool::kFreshCapacity);
  pool.drain(small);
  EXPECT_EQ(small.capacity(), 0u);
  EXPECT_EQ(pool.pooled(), 0u);

  Buffer next(0);
  pool.fill(next);
  EXPECT_EQ(next.capacity(), BufferPool::kFreshCapacity);
}

TEST(BufferPoolTest, LargeStorageIsFreedAndThePoolHoldsABoundedTotal) {
  BufferPool pool;
  Buffer large(0);
  large.ensure_writable(BufferPool::kMaxPooledCapacity + 1);
  pool.drain(large);
  EXPECT_EQ(large.capacity(), 0u);
  EXPECT_EQ(pool.pooled(), 0u);

  const size_t fit = BufferPool::kMaxPooledBytes / BufferPool::kFreshCapacity;
  for (size_t i = 0; i < fit + 10; ++i) {
    Buffer buffer(0);
    buffer.ensure_writable(BufferPool::kFreshCapacity - Buffer::kCheapPrepend);
    ASSERT_EQ(buffer.capacity(), BufferPool::kFreshCapacity);
    pool.drain(buffer);
    EXPECT_EQ(buffer.capacity(), 0u);
  }
  EXPECT_EQ(pool.pooled(), fit);
  EXPECT_EQ(pool.pooled_bytes(), BufferPool::kMaxPooledBytes);
}

TEST(BufferPoolTest, TrimFreesWhatIsPooledDownToWhatItKeeps) {
  BufferPool pool;
  for (int i = 0; i < 10; ++i) {
    Buffer buffer(0);
    pool.fill(buffer);
    pool.drain(buffer);
    ASSERT_EQ(pool.pooled(), 1u);  // the same storage again
  }
  std::vector<Buffer> buffers;
  for (int i = 0; i < 10; ++i) buffers.emplace_back(0);
  for (Buffer& buffer : buffers) pool.fill(buffer);
  for (Buffer& buffer : buffers) pool.drain(buffer);
  ASSERT_EQ(pool.pooled(), 10u);
  pool.trim(3 * BufferPool::kFreshCapacity + 1);
  EXPECT_EQ(pool.pooled(), 3u);
  EXPECT_EQ(pool.pooled_bytes(), 3 * BufferPool::kFreshCapacity);
  pool.trim(0);
  EXPECT_EQ(pool.pooled(), 0u);
  EXPECT_EQ(pool.pooled_bytes(), 0u);
  Buffer again(0);
  pool.fill(again);  // fresh storage, as before
  EXPECT_EQ(again.capacity(), BufferPool::kFreshCapacity);
}

}  // namespace
}  // namespace tern::net
