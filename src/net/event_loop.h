// EventLoop: the reactor. One per thread; it waits for I/O readiness, runs
// the handlers of ready channels, then runs work deferred to the end of the
// round and work posted from other threads.
//
// Ownership: an EventLoop is created on the thread that will run it (the
// thread that calls loop()) and owns its poller, its timer wheel and the
// connections it serves (ConnectionTable). Objects closed while events are
// being dispatched are destroyed, or recycled, after the round, so a handler
// later in the same round never sees a freed object (libuv's close callback
// rule, redis' freeClientAsync).
//
// Threads: everything is loop-thread only except quit(), wakeup(),
// run_in_loop() and queue_in_loop(), which any thread may call; they wake the
// loop through an eventfd. Loop-only methods check their thread, in release
// builds too, and abort naming both threads.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/loop_counter.h"
#include "net/buffer_pool.h"
#include "net/channel.h"
#include "net/poller.h"
#include "net/socket.h"
#include "net/timer_wheel.h"

namespace tern::net {

class ConnectionTable;

// How busy a loop is, for the least-loaded dispatch policy. The counters are
// written by the loop thread and read by the acceptor thread.
struct LoopLoad {
  std::atomic<uint32_t> connections{0};  // accepted connections open on this loop
  std::atomic<uint32_t> in_flight{0};    // handed to this loop, not yet opened
  std::atomic<uint64_t> recent_bytes{0};  // bytes moved, decayed once a second
  uint64_t bytes_this_period = 0;         // loop thread only
  // Since the loop started (metrics): written by the loop's thread only.
  LoopCounter accepted;        // connections opened on this loop
  LoopCounter shed;            // connections closed as accepted (limits, out of descriptors)
  LoopCounter bytes_received;  // on its accepted connections' sockets (not its clients')
  LoopCounter bytes_sent;      // the same, sent
};

class EventLoop {
 public:
  using Functor = std::function<void()>;      // work to run on the loop
  using Millis = std::chrono::milliseconds;  // the unit of timer delays

  // io: the kernel interface to wait with (net/poller.h); io_uring falls
  // back to epoll where the kernel refuses it.
  explicit EventLoop(IoBackend io = IoBackend::kDefault);

  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Runs until quit(); may be run again after it returns. Loop thread only.
  void loop();
  // Any thread. The loop finishes its current round and returns from loop().
  // The loop must outlive the call: loop() may see the flag and return
  // before quit() has finished waking it (EventLoopThread joins after).
  void quit();

  // Any thread. Runs f now if called on the loop thread, else queues it.
  void run_in_loop(Functor f);
  // Any thread. Runs f on the loop thread after the current round.
  void queue_in_loop(Functor f);
  // Any thread. Interrupts the wait for events; wake-ups are coalesced.
  void wakeup();

  // Timers. Loop thread only (from another thread, wrap in run_in_loop).
  // Deadlines count from the loop's cached clock and have 1 ms resolution.
  TimerId run_after(Millis delay, Functor f);
  // fn(arg) after delay: no std::function is kept (TimerWheel::add).
  TimerId run_after(Millis delay, TimerWheel::Function fn, void* arg);
  // f every `interval` (positive), until cancelled.
  TimerId run_every(Millis interval, Functor f);
  // Cancels a pending timer; false if it already fired (one-shot) or was
  // cancelled.
  bool cancel(TimerId id);
  // Moves a pending timer's deadline to now + delay. O(1), no system call
  // when the deadline moves later. A timer pushed back on every request is
  // cheaper still as a Timeout (net/timeout.h), which keeps the deadline in
  // its owner and leaves the wheel alone.
  bool refresh_timer(TimerId id, Millis delay);

  // Loop thread only. Runs f after every ready event of this round has been
  // handled (and before posted functors); work still deferred when the loop
  // is destroyed runs then, before its connections close.
  void defer(Functor f);
  // Loop thread only. Keeps `object` until this round's handlers and
  // deferred work are over (it may be what is running now: a job that ended
  // its own exchange), then lets it go; by then or by the loop's end. The
  // way to give up ownership from inside: no functor is allocated for it.
  void release_after_round(std::shared_ptr<const void> object);

  // Loop thread only. Hooks run each time the loop is woken through its
  // eventfd; a producer that has its own lock-free queue (TcpServer's accept
  // hand-off) pushes, calls wakeup(), and drains in its hook.
  uint64_t add_wake_hook(Functor hook);
  void remove_wake_hook(uint64_t id);

  // Whether the caller is the loop's thread, and an abort (naming both
  // threads) where it is not.
  bool is_in_loop_thread() const { return current() == this; }
  void assert_in_loop_thread() const {
    if (!is_in_loop_thread()) abort_not_in_loop_thread();
  }
  // The loop created on the calling thread, or nullptr.
  static EventLoop* current();

  // Per-loop slots: a component that keeps state in every loop it runs on
  // takes a process-wide key (any thread) and keeps its state's pointer in
  // each loop's slot for that key (loop thread only), found in O(1) by
  // index. net/loop_local.h owns the state; this only finds it.
  static size_t new_slot_key();
  void* slot(size_t key) const { return key < slots_.size() ? slots_[key] : nullptr; }
  void set_slot(size_t key, void* value);

  // The backend this loop waits with (after any fallback).
  IoBackend io_backend() const { return poller_->backend(); }
  // Loop thread only: for owners that send through the poller.
  Poller& poller() { return *poller_; }
  // The clock read after each wait for events.
  const CachedClock& clock() const { return clock_; }
  // The loop's connections, and its spare buffer memory. Loop thread only.
  ConnectionTable& connections() { return *connections_; }
  BufferPool& buffers() { return buffers_; }
  // How busy it is (see LoopLoad for which thread writes what).
  LoopLoad& load() { return load_; }
  const LoopLoad& load() const { return load_; }
  pid_t thread_id() const { return thread_id_; }      // the kernel's id of the loop's thread
  uint64_t iterations() const { return iterations_; }  // waits for events so far

  // Used by Channel. Loop thread only.
  void update_channel(Channel* channel);
  void remove_channel(Channel* channel);
  void forget_channel(Channel* channel);
  // Drops the channel's pending event from the current round (a scan of
  // the round's events: channels are rarely destroyed while dispatching,
  // whereas marking each queued one would cost a write per event).
  void forget_ready(Channel* channel);
  bool dispatching() const { return dispatching_; }  // handling this round's ready events

 private:
  [[noreturn]] void abort_not_in_loop_thread() const;
  void handle_wakeup();
  void handle_timer();
  void arm_timer_if_earlier();      // to the wheel's next wake-up
  void arm_timer_at(uint64_t expire);  // for a timer just set to `expire`
  void arm_timerfd(uint64_t at);
  int poll_timeout_ms() const;
  void run_deferred();
  void run_pending();

  const pid_t thread_id_;
  std::unique_ptr<Poller> poller_;  // declared first: destroyed last
  CachedClock clock_;
  TimerWheel wheel_;
  Socket wakeup_fd_;
  Channel wakeup_channel_;
  // The wheel's wake-up: a timerfd, or (when the poller can) the poll's
  // timeout, with no descriptor at all.
  const bool timers_by_poll_;
  Socket timer_fd_;
  Channel timer_channel_;
  uint64_t timer_armed_at_ = UINT64_MAX;

  std::atomic<bool> quit_{false};
  bool looping_ = false;
  bool dispatching_ = false;  // handling this round's ready events
  bool calling_pending_ = false;
  uint64_t iterations_ = 0;
  std::vector<ReadyEvent> ready_;
  std::vector<Functor> deferred_;
  std::vector<Functor> deferred_running_;
  std::vector<std::shared_ptr<const void>> releasing_;
  std::vector<std::shared_ptr<const void>> releasing_now_;
  std::vector<std::pair<uint64_t, Functor>> wake_hooks_;
  uint64_t next_hook_id_ = 1;

  std::atomic<bool> wake_pending_{false};
  std::mutex pending_mu_;
  std::vector<Functor> pending_;  // guarded by pending_mu_
  std::vector<Functor> pending_running_;

  std::vector<void*> slots_;  // by key (new_slot_key); loop thread only

  LoopLoad load_;
  BufferPool buffers_;
  std::unique_ptr<ConnectionTable> connections_;  // destroyed first
};

}  // namespace tern::net
