#include "net/event_loop_thread_pool.h"

#include <limits>

#include "base/assert.h"
#include "net/event_loop.h"
#include "net/event_loop_thread.h"

namespace tern::net {

EventLoopThreadPool::EventLoopThreadPool(EventLoop* base_loop, std::string name, int threads,
                                         std::vector<int> cpus)
    : base_loop_(base_loop), name_(std::move(name)), thread_count_(threads), cpus_(std::move(cpus)) {
  TERN_CHECK(threads >= 0);
}

// Joins every thread: each loop, with its connections, is destroyed on its
// own thread before this returns.
EventLoopThreadPool::~EventLoopThreadPool() = default;

void EventLoopThreadPool::start(const InitCallback& init) {
  base_loop_->assert_in_loop_thread();
  TERN_CHECK(!started_);
  started_ = true;
  for (int i = 0; i < thread_count_; ++i) {
    int cpu = cpus_.empty() ? -1 : cpus_[static_cast<size_t>(i) % cpus_.size()];
    auto thread = std::make_unique<EventLoopThread>(name_ + "-io" + std::to_string(i), cpu, init,
                                                    base_loop_->io_backend());
    loops_.push_back(thread->start());
    threads_.push_back(std::move(thread));
  }
  if (thread_count_ == 0) {
    loops_.push_back(base_loop_);
    if (init) init(base_loop_);
  }
}

size_t EventLoopThreadPool::pick_round_robin() {
  base_loop_->assert_in_loop_thread();
  TERN_DCHECK(started_);
  size_t index = next_;
  next_ = (next_ + 1) % loops_.size();
  return index;
}

size_t EventLoopThreadPool::pick_least_loaded() {
  base_loop_->assert_in_loop_thread();
  TERN_DCHECK(started_);
  size_t best = 0;
  uint64_t best_score = std::numeric_limits<uint64_t>::max();
  // Start after the previous pick so that ties rotate instead of piling up on loop 0.
  for (size_t k = 0; k < loops_.size(); ++k) {
    size_t i = (next_ + k) % loops_.size();
    LoopLoad& load = loops_[i]->load();
    uint64_t score = load.connections.load(std::memory_order_relaxed) +
                     load.in_flight.load(std::memory_order_relaxed) +
                     load.recent_bytes.load(std::memory_order_relaxed) / kBytesPerConnection;
    if (score < best_score) {
      best_score = score;
      best = i;
    }
  }
  next_ = (best + 1) % loops_.size();
  return best;
}

}  // namespace tern::net
