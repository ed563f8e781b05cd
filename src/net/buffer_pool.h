// BufferPool: the spare buffer memory of one loop.
//
// Connections give their buffers' storage back when the buffers empty (the
// request was consumed, the response was written) and take storage again
// when bytes arrive or a response starts. So an idle keep-alive connection
// holds no buffer memory at all, and a busy loop does not allocate per
// request: it moves a pointer in and out of this pool.
//
// Bounded: storage larger than kMaxPooledCapacity is freed rather than kept,
// and the pool keeps at most kMaxPooledBytes. Storage smaller than
// kFreshCapacity (a buffer that grew from nothing to fit a few bytes) is
// freed too: pooled, it would be handed to the next buffer that needs room
// and grown there, which is an allocation the pool exists to save.
//
// Owned by EventLoop. Loop thread only.
#pragma once

#include <cstddef>
#include <vector>

#include "net/buffer.h"

namespace tern::net {

class BufferPool {
 public:
  static constexpr size_t kFreshCapacity = 4096;  // a buffer made when the pool has none
  // The largest storage kept: above a step of output (64 KiB of a file,
  // with its frame headers or TLS records' overhead, and a buffer's prepend
  // room, is a little more).
  static constexpr size_t kMaxPooledCapacity = 128 * 1024;
  static constexpr size_t kMaxPooledBytes = 4 * 1024 * 1024;  // the most the pool keeps in all

  BufferPool() = default;
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // Gives `buffer` storage if it has none (pooled, else fresh).
  void fill(Buffer& buffer);
  // Takes the storage of `buffer` if it is empty: into the pool, or freed.
  void drain(Buffer& buffer);

  // Frees pooled storage until at most `keep_bytes` stay (after a burst
  // of connections, so that its peak is not kept for good).
  void trim(size_t keep_bytes);

  size_t pooled() const { return free_.size(); }  // storages kept
  size_t pooled_bytes() const { return bytes_; }  // their bytes

 private:
  std::vector<Buffer::Storage> free_;
  size_t bytes_ = 0;
};

}  // namespace tern::net
