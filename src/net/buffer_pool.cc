#include "net/buffer_pool.h"

#include <memory>

namespace tern::net {

void BufferPool::fill(Buffer& buffer) {
  if (buffer.capacity() != 0) return;
  if (free_.empty()) {
    buffer.adopt_storage(Buffer::Storage{std::make_unique_for_overwrite<char[]>(kFreshCapacity),
                                         kFreshCapacity});
    return;
  }
  bytes_ -= free_.back().capacity;
  buffer.adopt_storage(std::move(free_.back()));
  free_.pop_back();
}

void BufferPool::drain(Buffer& buffer) {
  if (buffer.capacity() == 0 || !buffer.empty()) return;
  Buffer::Storage storage = buffer.release_storage();
  if (storage.capacity < kFreshCapacity || storage.capacity > kMaxPooledCapacity ||
      bytes_ + storage.capacity > kMaxPooledBytes) {
    return;  // freed here
  }
  bytes_ += storage.capacity;
  free_.push_back(std::move(storage));
}

void BufferPool::trim(size_t keep_bytes) {
  while (bytes_ > keep_bytes) {
    bytes_ -= free_.back().capacity;
    free_.pop_back();
  }
  if (free_.empty()) std::vector<Buffer::Storage>().swap(free_);
}

}  // namespace tern::net
