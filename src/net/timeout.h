// Timeout: a one-shot timer for an owner that pushes its deadline back far
// more often than it lets it fire: a connection's idle, header or send
// timeout, pushed back on every request and almost never reached.
//
// The deadline is kept here, in the owner's memory, which is in the cache
// while the owner works. When it moves later, only that field changes; the
// wheel's timer stays where it was placed, and when it comes up early it is
// placed again for what is left (once per timeout period at most). Moving
// the deadline earlier moves the wheel's timer at once. So arming a
// pending Timeout to a later deadline costs a clock read and a store, and
// no visit to the wheel, whose node for this timer would otherwise be one
// more cache miss per request when thousands of connections are open (as
// nginx's lazy timer updates spare its rbtree).
//
// Members of an object with a stable address (the wheel's timer points
// back here). Loop thread only: it uses the calling thread's EventLoop,
// which must be the same for as long as it is armed. The owner cancels
// before it goes away; destruction does not, so that objects torn down
// with their loop do not touch it. 40 bytes.
#pragma once

#include <chrono>
#include <cstdint>

#include "net/timer_wheel.h"

namespace tern::net {

class EventLoop;

class Timeout {
 public:
  using Handler = void (*)(void* owner);  // called with the owner when the deadline passes

  // Unarmed; when it fires, handler(owner) runs.
  Timeout(Handler handler, void* owner) : handler_(handler), owner_(owner) {}

  Timeout(const Timeout&) = delete;
  Timeout& operator=(const Timeout&) = delete;

  // Runs the handler `delay` from now on the loop's clock (1 ms
  // resolution), replacing any deadline set before, earlier or later.
  void arm(std::chrono::milliseconds delay);
  void cancel();                                 // unarmed again: the handler does not run
  bool armed() const { return deadline_ != 0; }  // a deadline is set
  // Milliseconds on the loop's steady clock; 0 when not armed.
  uint64_t deadline_ms() const { return deadline_; }

 private:
  void place(EventLoop* loop, uint64_t now);
  void on_timer();

  // The two fields arm() reads and writes first: an owner that lays out
  // its hot fields in one cache line can put them there.
  uint64_t deadline_ = 0;  // when the handler is due; 0 when not armed
  uint64_t placed_ = 0;    // the wheel timer's deadline; 0 when not placed
  TimerId timer_;          // the wheel's timer, valid while placed

  const Handler handler_;
  void* const owner_;
};

}  // namespace tern::net
