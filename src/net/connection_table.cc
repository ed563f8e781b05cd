#include "net/connection_table.h"

#include <malloc.h>

#include <algorithm>

#include "base/assert.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"

namespace tern::net {

ConnectionTable::ConnectionTable(EventLoop* loop) : loop_(loop) {}

ConnectionTable::~ConnectionTable() = default;

TcpConnection* ConnectionTable::open(Socket socket, const InetAddress& peer,
                                     const ConnectionCallbacks* callbacks, TriggerMode trigger,
                                     bool accepted) {
  loop_->assert_in_loop_thread();
  uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    TERN_CHECK(slots_.size() < UINT32_MAX);
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  auto& object = slots_[slot];
  if (!object) object = std::make_unique<TcpConnection>(loop_, slot);
  object->open(std::move(socket), peer, callbacks, trigger);
  object->accepted_ = accepted;
  peak_ = std::max(peak_, ++live_);
  if (accepted) loop_->load().connections.fetch_add(1, std::memory_order_relaxed);
  return object.get();
}

void ConnectionTable::establish(TcpConnection* conn, bool input_waiting) {
  conn->establish(input_waiting);
}

TcpConnection* ConnectionTable::find(ConnectionId id) {
  loop_->assert_in_loop_thread();
  if (id.loop != loop_ || id.slot >= slots_.size()) return nullptr;
  TcpConnection* conn = slots_[id.slot].get();
  if (conn == nullptr || conn->generation_ != id.generation) return nullptr;
  if (conn->state_ == TcpConnection::State::kIdle || conn->disconnected()) return nullptr;
  return conn;
}

void ConnectionTable::close_all(const ConnectionCallbacks* callbacks) {
  loop_->assert_in_loop_thread();
  for (auto& conn : slots_) {
    if (conn && conn->state_ != TcpConnection::State::kIdle && conn->callbacks_ == callbacks) conn->handle_close();
  }
}

void ConnectionTable::release(TcpConnection* conn) {
  TERN_DCHECK(live_ > 0);
  --live_;
  if (conn->accepted_) loop_->load().connections.fetch_sub(1, std::memory_order_relaxed);
  closing_.push_back(conn->slot_);
  if (release_scheduled_ || peak_ < kBurst || 2 * live_ > peak_) return;
  release_scheduled_ = true;
  loop_->run_after(kQuiet, [this] { release_burst(); });
}

void ConnectionTable::release_burst() {
  release_scheduled_ = false;
  if (2 * live_ > peak_) return;  // busy again: the burst is not over
  loop_->buffers().trim(kKeptBufferBytes);
  // The idle objects the burst left lie among what their connections
  // allocated: each would pin pages the trim could give back. The next
  // connections take them from the back of free_; those are kept.
  size_t kept = 0;
  for (auto slot = free_.rbegin(); slot != free_.rend(); ++slot) {
    auto& object = slots_[*slot];
    if (object && ++kept > kKeptIdle) object.reset();
  }
  for (auto& [key, fn] : burst_listeners_) fn();
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // Under a sanitizer the allocator is the sanitizer's, and glibc's trim
  // walks arenas that are not in use; two loops' first trims racing there
  // crashed under ASan. Nothing is given back then, which a test build can
  // afford.
  ::malloc_trim(0);
#endif
  peak_ = live_;
}

void ConnectionTable::reap() {
  for (uint32_t slot : closing_) {
    if (free_.size() < kMaxPooled) {
      slots_[slot]->recycle();
    } else {
      slots_[slot].reset();
    }
    free_.push_back(slot);
  }
  closing_.clear();
}

void ConnectionTable::add_burst_listener(const void* key, std::function<void()> fn) {
  burst_listeners_.emplace_back(key, std::move(fn));
}

void ConnectionTable::remove_burst_listener(const void* key) {
  std::erase_if(burst_listeners_, [key](const auto& listener) { return listener.first == key; });
}

}  // namespace tern::net
