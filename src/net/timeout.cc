#include "net/timeout.h"

#include "base/assert.h"
#include "net/event_loop.h"

namespace tern::net {

void Timeout::arm(std::chrono::milliseconds delay) {
  EventLoop* loop = EventLoop::current();
  TERN_DCHECK(loop != nullptr);
  const uint64_t now = loop->clock().now_ms();
  // At least one tick ahead, as the wheel runs a timer due now: deadline_
  // is then never 0.
  const uint64_t deadline = now + (delay.count() > 0 ? static_cast<uint64_t>(delay.count()) : 1);
  deadline_ = deadline;
  if (placed_ != 0) {
    if (deadline >= placed_) return;  // on_timer() places it again
    loop->cancel(timer_);
  }
  place(loop, now);
}

void Timeout::cancel() {
  deadline_ = 0;
  if (placed_ == 0) return;
  placed_ = 0;
  EventLoop* loop = EventLoop::current();
  TERN_DCHECK(loop != nullptr);
  if (loop != nullptr) loop->cancel(timer_);
}

void Timeout::place(EventLoop* loop, uint64_t now) {
  placed_ = deadline_;
  timer_ = loop->run_after(
      std::chrono::milliseconds(deadline_ - now), [](void* self) { static_cast<Timeout*>(self)->on_timer(); }, this);
}

void Timeout::on_timer() {
  placed_ = 0;
  EventLoop* loop = EventLoop::current();
  const uint64_t now = loop->clock().now_ms();
  if (deadline_ > now) return place(loop, now);  // pushed back since it was placed
  deadline_ = 0;
  handler_(owner_);  // may arm again, or destroy the owner
}

}  // namespace tern::net
