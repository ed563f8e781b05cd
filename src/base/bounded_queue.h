// BoundedQueue: a fixed-capacity lock-free queue for many producers and many
// consumers (Dmitry Vyukov's bounded MPMC design).
//
// Each cell carries a sequence number that says whose turn it is: a producer
// may fill cell i when its sequence equals the enqueue position, a consumer may
// empty it when the sequence is one past. Producers and consumers each claim a
// position with one compare-and-swap and never wait for each other unless the
// queue is full or empty, when try_push/try_pop return false.
//
// TcpServer uses it to hand accepted sockets from the acceptor thread to I/O
// loops without a lock. Any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "base/assert.h"

namespace tern {

template <typename T>
class BoundedQueue {
 public:
  // capacity is rounded up to a power of two.
  explicit BoundedQueue(size_t capacity) {
    size_t size = 2;
    while (size < capacity) size <<= 1;
    mask_ = size - 1;
    cells_ = std::make_unique<Cell[]>(size);
    for (size_t i = 0; i < size; ++i) cells_[i].sequence.store(i, std::memory_order_relaxed);
  }

  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  // Adds `value` at the back; false when the queue is full. Any thread.
  bool try_push(T value) {
    size_t pos = enqueue_pos_.load(std::memory_order_relaxed);
    Cell* cell;
    for (;;) {
      cell = &cells_[pos & mask_];
      size_t seq = cell->sequence.load(std::memory_order_acquire);
      auto diff = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos);
      if (diff == 0) {
        if (enqueue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
      } else if (diff < 0) {
        return false;  // full
      } else {
        pos = enqueue_pos_.load(std::memory_order_relaxed);
      }
    }
    cell->value = std::move(value);
    cell->sequence.store(pos + 1, std::memory_order_release);
    return true;
  }

  // Takes the front into `out`; false when the queue is empty. Any thread.
  bool try_pop(T& out) {
    size_t pos = dequeue_pos_.load(std::memory_order_relaxed);
    Cell* cell;
    for (;;) {
      cell = &cells_[pos & mask_];
      size_t seq = cell->sequence.load(std::memory_order_acquire);
      auto diff = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos + 1);
      if (diff == 0) {
        if (dequeue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
      } else if (diff < 0) {
        return false;  // empty
      } else {
        pos = dequeue_pos_.load(std::memory_order_relaxed);
      }
    }
    out = std::move(cell->value);
    cell->sequence.store(pos + mask_ + 1, std::memory_order_release);
    return true;
  }

  size_t capacity() const { return mask_ + 1; }  // values it holds at most

 private:
  struct Cell {
    std::atomic<size_t> sequence;
    T value;
  };
  static constexpr size_t kCacheLine = 64;

  std::unique_ptr<Cell[]> cells_;
  size_t mask_ = 0;
  alignas(kCacheLine) std::atomic<size_t> enqueue_pos_{0};
  alignas(kCacheLine) std::atomic<size_t> dequeue_pos_{0};
};

}  // namespace tern
