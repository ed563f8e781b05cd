#include "net/event_loop.h"

#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <mutex>

#include "base/assert.h"
#include "base/log.h"
#include "net/connection_table.h"

namespace tern::net {
namespace {

thread_local EventLoop* t_loop_in_this_thread = nullptr;

constexpr size_t kInitialCapacity = 256;

pid_t current_thread_id() {
  static thread_local pid_t tid = static_cast<pid_t>(::gettid());
  return tid;
}

int create_eventfd() {
  int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  TERN_CHECK_MSG(fd >= 0, "eventfd: {}", std::strerror(errno));
  return fd;
}

int create_timerfd() {
  int fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  TERN_CHECK_MSG(fd >= 0, "timerfd_create: {}", std::strerror(errno));
  return fd;
}

// A peer that closes while we write must give EPIPE, not kill the process.
// send() uses MSG_NOSIGNAL, but sendfile() has no such flag.
void ignore_sigpipe_once() {
  static std::once_flag once;
  std::call_once(once, [] { std::signal(SIGPIPE, SIG_IGN); });
}

}  // namespace

EventLoop* EventLoop::current() { return t_loop_in_this_thread; }

size_t EventLoop::new_slot_key() {
  static std::atomic<size_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void EventLoop::set_slot(size_t key, void* value) {
  assert_in_loop_thread();
  if (key >= slots_.size()) slots_.resize(key + 1, nullptr);
  slots_[key] = value;
}

EventLoop::EventLoop(IoBackend io)
    : thread_id_(current_thread_id()),
      poller_(Poller::create(io)),
      wheel_(clock_.now_ms()),
      wakeup_fd_(create_eventfd()),
      wakeup_channel_(this, wakeup_fd_.fd()),
      timers_by_poll_(poller_->drives_timers()),
      timer_fd_(timers_by_poll_ ? -1 : create_timerfd()),
      timer_channel_(this, timer_fd_.fd()),
      connections_(std::make_unique<ConnectionTable>(this)) {
  TERN_CHECK_MSG(t_loop_in_this_thread == nullptr,
                 "thread {} already has an EventLoop; one loop per thread", thread_id_);
  t_loop_in_this_thread = this;
  ignore_sigpipe_once();
  // Sized up front so that a busy round (more ready events, more deferred
  // work than any round before) does not allocate in steady state.
  ready_.reserve(kInitialCapacity);
  deferred_.reserve(kInitialCapacity);
  deferred_running_.reserve(kInitialCapacity);
  pending_.reserve(kInitialCapacity);
  pending_running_.reserve(kInitialCapacity);
  wakeup_channel_.set_read_callback([this] { handle_wakeup(); });
  wakeup_channel_.enable_reading();
  if (!timers_by_poll_) {
    timer_channel_.set_read_callback([this] { handle_timer(); });
    timer_channel_.enable_reading();
  }
}

EventLoop::~EventLoop() {
  assert_in_loop_thread();
  // Work deferred to the end of the round (a deferred delete) runs at the
  // end of the last one, while what it may touch is still here. (What the
  // connections' closing below defers is dropped: it may name them.)
  run_deferred();
  connections_.reset();  // closes what is still open, before the poller goes
  wakeup_channel_.remove();
  if (!timers_by_poll_) timer_channel_.remove();
  t_loop_in_this_thread = nullptr;
}

void EventLoop::loop() {
  assert_in_loop_thread();
  TERN_CHECK_MSG(!looping_, "EventLoop::loop() is not reentrant");
  looping_ = true;
  // Work deferred on this thread while the loop was not running (a send
  // queued before loop(), between two runs of a test's loop) runs before
  // the first wait, which may be waiting for it.
  run_deferred();
  while (!quit_.load(std::memory_order_acquire)) {
    ready_.clear();
    poller_->poll(timers_by_poll_ ? poll_timeout_ms() : -1, &ready_);
    clock_.update();
    ++iterations_;
    dispatching_ = true;
    for (const ReadyEvent& event : ready_) {
      if (event.channel == nullptr) continue;  // its owner was destroyed this round
      if (event.revents == ReadyEvent::kReceived) {
        event.channel->handle_received(event.data, event.result);
      } else if (event.revents == ReadyEvent::kSent) {
        event.channel->handle_sent(event.result);
      } else {
        event.channel->handle_event(event.revents);
      }
    }
    if (timers_by_poll_ && clock_.now_ms() >= timer_armed_at_) handle_timer();
    dispatching_ = false;
    run_deferred();
    run_pending();
    // Posted work may have closed connections or deferred work of its own.
    run_deferred();
  }
  // Ready to run again (a test's loop runs a few times).
  quit_.store(false, std::memory_order_release);
  looping_ = false;
}

void EventLoop::quit() {
  quit_.store(true, std::memory_order_release);
  if (!is_in_loop_thread()) wakeup();
}

void EventLoop::run_in_loop(Functor f) {
  if (is_in_loop_thread()) {
    f();
  } else {
    queue_in_loop(std::move(f));
  }
}

void EventLoop::queue_in_loop(Functor f) {
  {
    std::lock_guard lock(pending_mu_);
    pending_.push_back(std::move(f));
  }
  // On the loop thread, pending work runs at the end of this round anyway,
  // unless we are already in that phase.
  if (!is_in_loop_thread() || calling_pending_) wakeup();
}

void EventLoop::wakeup() {
  if (wake_pending_.exchange(true, std::memory_order_acq_rel)) return;
  uint64_t one = 1;
  ssize_t n = ::write(wakeup_fd_.fd(), &one, sizeof one);
  if (n != sizeof one) TERN_LOG_ERROR("eventfd write: {}", std::strerror(errno));
}

void EventLoop::handle_wakeup() {
  uint64_t value = 0;
  ssize_t n = ::read(wakeup_fd_.fd(), &value, sizeof value);
  (void)n;  // EAGAIN after a spurious wake is fine
  // Reset before draining: a producer that pushes after this point sees
  // false and wakes us again; one that pushed before is drained below.
  wake_pending_.store(false, std::memory_order_seq_cst);
  for (size_t i = 0; i < wake_hooks_.size(); ++i) wake_hooks_[i].second();
}

uint64_t EventLoop::add_wake_hook(Functor hook) {
  assert_in_loop_thread();
  uint64_t id = next_hook_id_++;
  wake_hooks_.emplace_back(id, std::move(hook));
  return id;
}

void EventLoop::remove_wake_hook(uint64_t id) {
  assert_in_loop_thread();
  std::erase_if(wake_hooks_, [id](const auto& entry) { return entry.first == id; });
}

TimerId EventLoop::run_after(Millis delay, Functor f) {
  assert_in_loop_thread();
  uint64_t ms = delay.count() > 0 ? static_cast<uint64_t>(delay.count()) : 0;
  uint64_t expire = clock_.now_ms() + ms;
  TimerId id = wheel_.add(expire, std::move(f));
  arm_timer_at(expire);
  return id;
}

TimerId EventLoop::run_after(Millis delay, TimerWheel::Function fn, void* arg) {
  assert_in_loop_thread();
  uint64_t ms = delay.count() > 0 ? static_cast<uint64_t>(delay.count()) : 0;
  uint64_t expire = clock_.now_ms() + ms;
  TimerId id = wheel_.add(expire, fn, arg);
  arm_timer_at(expire);
  return id;
}

TimerId EventLoop::run_every(Millis interval, Functor f) {
  assert_in_loop_thread();
  TERN_CHECK_MSG(interval.count() > 0, "run_every needs a positive interval");
  auto ms = static_cast<uint64_t>(interval.count());
  uint64_t expire = clock_.now_ms() + ms;
  TimerId id = wheel_.add(expire, std::move(f), ms);
  arm_timer_at(expire);
  return id;
}

bool EventLoop::cancel(TimerId id) {
  assert_in_loop_thread();
  // The timerfd stays armed: one spurious wake is cheaper than a syscall.
  return wheel_.cancel(id);
}

bool EventLoop::refresh_timer(TimerId id, Millis delay) {
  assert_in_loop_thread();
  uint64_t ms = delay.count() > 0 ? static_cast<uint64_t>(delay.count()) : 0;
  uint64_t expire = clock_.now_ms() + ms;
  if (!wheel_.refresh(id, expire)) return false;
  arm_timer_at(expire);
  return true;
}

void EventLoop::handle_timer() {
  if (!timers_by_poll_) {
    uint64_t expirations = 0;
    ssize_t n = ::read(timer_fd_.fd(), &expirations, sizeof expirations);
    (void)n;
  }
  timer_armed_at_ = UINT64_MAX;  // one-shot: it is disarmed now
  wheel_.advance(clock_.now_ms());
  arm_timer_if_earlier();
}

void EventLoop::arm_timer_at(uint64_t expire) {
  // The wheel fires a timer at the first tick after now, whatever it was given.
  expire = std::max(expire, wheel_.now() + 1);
  // Armed no later than this already: nothing to do. This is the common
  // case (an idle timeout pushed back on every request) and costs no scan
  // of the wheel and no system call. Arming at a timer's exact deadline is
  // right even if it sits in a higher wheel level: advance() cascades up
  // to the time it is given.
  if (expire >= timer_armed_at_) return;
  arm_timerfd(expire);
}

void EventLoop::arm_timer_if_earlier() {
  auto next = wheel_.next_wakeup();
  if (!next || *next >= timer_armed_at_) return;
  arm_timerfd(*next);
}

int EventLoop::poll_timeout_ms() const {
  if (timer_armed_at_ == UINT64_MAX) return -1;
  // From a fresh clock: the cached one is as old as this round's work.
  uint64_t now = CachedClock::to_ms(std::chrono::steady_clock::now());
  if (timer_armed_at_ <= now) return 0;
  uint64_t wait = timer_armed_at_ - now;
  return wait > INT32_MAX ? INT32_MAX : static_cast<int>(wait);
}

void EventLoop::arm_timerfd(uint64_t at) {
  timer_armed_at_ = at;
  if (timers_by_poll_) return;  // the next poll waits no longer than this
  itimerspec spec{};
  spec.it_value.tv_sec = static_cast<time_t>(at / 1000);
  spec.it_value.tv_nsec = static_cast<long>((at % 1000) * 1000000);
  if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;
  if (::timerfd_settime(timer_fd_.fd(), TFD_TIMER_ABSTIME, &spec, nullptr) != 0) {
    TERN_LOG_ERROR("timerfd_settime: {}", std::strerror(errno));
  }
}

void EventLoop::defer(Functor f) {
  assert_in_loop_thread();
  deferred_.push_back(std::move(f));
}

void EventLoop::release_after_round(std::shared_ptr<const void> object) {
  assert_in_loop_thread();
  releasing_.push_back(std::move(object));
}

void EventLoop::run_deferred() {
  // Deferred work may defer more (a close that closes another), and what is
  // let go may too; run until quiet.
  while (!deferred_.empty() || !releasing_.empty()) {
    while (!deferred_.empty()) {
      deferred_running_.swap(deferred_);
      for (Functor& f : deferred_running_) f();
      deferred_running_.clear();
    }
    releasing_now_.swap(releasing_);
    releasing_now_.clear();
  }
  connections_->reap();
}

void EventLoop::run_pending() {
  {
    std::lock_guard lock(pending_mu_);
    if (pending_.empty()) return;
    pending_running_.swap(pending_);
  }
  calling_pending_ = true;
  for (Functor& f : pending_running_) f();
  pending_running_.clear();
  calling_pending_ = false;
}

void EventLoop::update_channel(Channel* channel) {
  assert_in_loop_thread();
  poller_->update_channel(channel);
}

void EventLoop::remove_channel(Channel* channel) {
  assert_in_loop_thread();
  poller_->remove_channel(channel);
}

void EventLoop::forget_channel(Channel* channel) {
  assert_in_loop_thread();
  poller_->forget_channel(channel);
}

void EventLoop::forget_ready(Channel* channel) {
  assert_in_loop_thread();
  for (ReadyEvent& event : ready_) {
    if (event.channel == channel) event.channel = nullptr;
  }
}

void EventLoop::abort_not_in_loop_thread() const {
  tern::detail::check_failed(__FILE__, __LINE__, "is_in_loop_thread()",
                             fmt::format("EventLoop {} belongs to thread {}, called from thread {}",
                                         static_cast<const void*>(this), thread_id_,
                                         current_thread_id()));
}

}  // namespace tern::net
