// IoUringPoller's ring of provided buffers for receives: how it is set up
// and grown, and how a completion's bytes are found in it and the buffers
// go back to the kernel. The rest is in io_uring_poller.cc.
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "net/poller/io_uring_poller.h"

namespace tern::net {
namespace {

// Provided buffers for receives. Where the kernel consumes a buffer in parts
// (IOU_PBUF_RING_INC, Linux 6.12), the buffers are large and each receive
// takes what it needs, up to kMaxReceive, from the front of one: a 64 KiB
// message is one completion rather than sixteen, and small requests of
// many connections share a buffer. Where it does not, each receive takes a
// whole buffer, so they are small. The ring starts with kInitialBytes and
// doubles, at most once a round, up to kMaxBytes, each time a receive finds
// it empty; such a receive is re-armed next round and its bytes wait in the
// socket meanwhile. So memory follows what the loop's busiest round needed
// (the buffers are reserved, not touched, up front).
constexpr unsigned kInitialBytes = 256 * 1024;
constexpr unsigned kMaxBytes = 4 * 1024 * 1024;
constexpr unsigned kIncrementalBufferSize = 64 * 1024;
constexpr unsigned kWholeBufferSize = 4096;
// From Linux 6.12's uapi header (liburing 2.3's copy predates them).
constexpr uint16_t kRingIncremental = 2;      // IOU_PBUF_RING_INC
constexpr uint32_t kCqeBufferMore = 1u << 4;  // IORING_CQE_F_BUF_MORE

// io_uring_buf_reg's flags field (named pad in liburing's older copies).
template <typename Reg>
void set_ring_flags(Reg& reg, uint16_t flags) {
  if constexpr (requires { reg.flags; }) {
    reg.flags = flags;
  } else {
    reg.pad = flags;
  }
}

// TERN_IO_URING_BUFFERS=whole: a receive takes a whole small buffer even
// where the kernel could consume them in parts.
bool incremental_wanted() {
  const char* mode = std::getenv("TERN_IO_URING_BUFFERS");
  return mode == nullptr || std::strcmp(mode, "whole") != 0;
}

}  // namespace

bool IoUringPoller::setup_buffers() {
  const size_t ring_bytes = kBuffers * sizeof(io_uring_buf);
  void* ring = ::mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  if (ring == MAP_FAILED) return false;
  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<uint64_t>(ring);
  reg.ring_entries = kBuffers;
  reg.bgid = kBufferGroup;
  // Incremental first; kernels before 6.12 refuse the flag.
  incremental_ = incremental_wanted();
  if (incremental_) {
    set_ring_flags(reg, kRingIncremental);
    if (io_uring_register_buf_ring(&ring_, &reg, 0) != 0) incremental_ = false;
  }
  if (!incremental_) {
    set_ring_flags(reg, 0);
    if (io_uring_register_buf_ring(&ring_, &reg, 0) != 0) {
      ::munmap(ring, ring_bytes);
      return false;
    }
  }
  buffer_size_ = incremental_ ? kIncrementalBufferSize : kWholeBufferSize;
  max_buffers_ = std::min(kBuffers, kMaxBytes / buffer_size_);
  // Pages are touched only as the kernel fills them.
  void* memory = ::mmap(nullptr, static_cast<size_t>(max_buffers_) * buffer_size_, PROT_READ | PROT_WRITE,
                        MAP_ANONYMOUS | MAP_PRIVATE | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) {
    io_uring_unregister_buf_ring(&ring_, kBufferGroup);
    ::munmap(ring, ring_bytes);
    return false;
  }
  buffer_ring_ = static_cast<io_uring_buf_ring*>(ring);
  buffers_ = static_cast<char*>(memory);
  if (incremental_) consumed_.assign(max_buffers_, 0);
  io_uring_buf_ring_init(buffer_ring_);
  grow_buffers(std::max(kInitialBytes / buffer_size_, 2u));
  return true;
}

void IoUringPoller::grow_buffers(unsigned count) {
  // Fresh ids (buffers never used yet) join the ring; at most max_buffers_
  // (<= kBuffers) are ever in it, so it cannot overflow.
  count = std::min(count, max_buffers_ - buffers_in_use_);
  for (unsigned i = 0; i < count; ++i) {
    offer(static_cast<uint16_t>(buffers_in_use_ + i), static_cast<int>(i));
  }
  io_uring_buf_ring_advance(buffer_ring_, static_cast<int>(count));
  buffers_in_use_ += count;
}

void IoUringPoller::offer(uint16_t buffer_id, int offset) {
  // Visible to the kernel once the ring is advanced past it.
  io_uring_buf_ring_add(buffer_ring_, buffers_ + static_cast<size_t>(buffer_id) * buffer_size_,
                        buffer_size_, buffer_id, io_uring_buf_ring_mask(kBuffers), offset);
}

const char* IoUringPoller::take_bytes(const io_uring_cqe& cqe) {
  if (!(cqe.flags & IORING_CQE_F_BUFFER)) return nullptr;
  const auto buffer_id = static_cast<uint16_t>(cqe.flags >> IORING_CQE_BUFFER_SHIFT);
  const char* buffer = buffers_ + static_cast<size_t>(buffer_id) * buffer_size_;
  if (!incremental_) {
    lent_.push_back(buffer_id);
    return cqe.res > 0 ? buffer : nullptr;
  }
  // Consumed in parts: the bytes follow those of the buffer's earlier
  // completions, and the buffer is the kernel's until a completion says
  // it is done with it. A completion without bytes took nothing from it
  // (kernels before a 2025 fix report an end of stream as the buffer's
  // last use, though it stays at the ring's head).
  if (cqe.res <= 0) return nullptr;
  const char* bytes = buffer + consumed_[buffer_id];
  consumed_[buffer_id] += static_cast<uint32_t>(cqe.res);
  if (!(cqe.flags & kCqeBufferMore)) {
    consumed_[buffer_id] = 0;
    lent_.push_back(buffer_id);
  }
  return bytes;
}

void IoUringPoller::return_lent_buffers() {
  // The bytes of last round's receives have been handled (copied into the
  // connections' buffers): their buffers go back to the kernel.
  if (lent_.empty()) return;
  int offset = 0;
  for (uint16_t id : lent_) offer(id, offset++);
  io_uring_buf_ring_advance(buffer_ring_, offset);
  lent_.clear();
}

}  // namespace tern::net
