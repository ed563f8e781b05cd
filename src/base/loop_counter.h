// LoopCounter and SlotTable: counters that one thread (a loop) writes and
// any thread reads, for metrics kept per loop and summed when asked.
//
// A LoopCounter is an atomic only so that a reader on another thread sees
// a whole value: its one writer adds with a relaxed load and store, no
// locked instruction and no cache line shared with another writer. Many
// writers need std::atomic's fetch_add instead.
//
//   LoopCounter requests;       // in a per-loop struct
//   requests.add();             // on that loop
//   uint64_t n = requests.get();  // anywhere
//
// A SlotTable<T> numbers Ts from 0 without ever moving one: chunks of
// kChunk are allocated on first use (by any thread, a compare-exchange
// deciding a race) and freed with the table, so a reader may hold on to a
// T while the writer grows the table. Up to kChunk * kChunks slots.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace tern {

// A counter one thread adds to and any thread reads.
class LoopCounter {
 public:
  // Owner thread only: a relaxed load and store, no read-modify-write.
  void add(uint64_t n = 1) {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  // Any thread: the count as of some recent moment.
  uint64_t get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A fixed number of T slots, allocated a chunk at a time as slots are first
// used, that never move once made: any thread may find slot i without a lock.
template <typename T, size_t kChunk = 64, size_t kChunks = 256>
class SlotTable {
 public:
  static constexpr size_t kCapacity = kChunk * kChunks;  // slots at most

  SlotTable() = default;
  SlotTable(const SlotTable&) = delete;
  SlotTable& operator=(const SlotTable&) = delete;
  ~SlotTable() {
    for (auto& chunk : chunks_) delete chunk.load(std::memory_order_relaxed);
  }

  // Slot i (i < kCapacity), allocating its chunk if needed.
  T& at(size_t i) {
    std::atomic<Chunk*>& slot = chunks_[i / kChunk];
    Chunk* chunk = slot.load(std::memory_order_acquire);
    if (chunk == nullptr) {
      auto fresh = std::make_unique<Chunk>();
      if (slot.compare_exchange_strong(chunk, fresh.get(), std::memory_order_acq_rel)) {
        chunk = fresh.release();
      }
      // else: another thread won; `chunk` holds its chunk.
    }
    return (*chunk)[i % kChunk];
  }
  // Slot i, or null when its chunk was never used.
  const T* find(size_t i) const {
    if (i >= kCapacity) return nullptr;
    const Chunk* chunk = chunks_[i / kChunk].load(std::memory_order_acquire);
    return chunk != nullptr ? &(*chunk)[i % kChunk] : nullptr;
  }

 private:
  using Chunk = std::array<T, kChunk>;
  std::array<std::atomic<Chunk*>, kChunks> chunks_{};
};

}  // namespace tern
