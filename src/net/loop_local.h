// LoopLocal<T>: one T per event loop, for state a component keeps in every
// loop it runs on (an HTTP server's connection pool and clock, the static
// files' open-file cache, the FastCGI pools). Set up on each loop's thread
// when that loop starts, found from any code on that loop in O(1) through
// the loop's slot for this object's key (EventLoop::slot), with no lock and
// no thread_local: one mechanism for every such state.
//
//   LoopLocal<Context> contexts;
//   // on each I/O loop's thread, as it starts:
//   contexts.emplace(loop, args...);
//   // later, on that loop:
//   Context& mine = *contexts.get(loop);   // or contexts.current()
//
// Owns the objects (they go with it, or when replaced); destroy it after the
// loops have stopped using them. emplace() and get() are loop thread only;
// for_each() takes the lock that emplace() takes, from any thread, and
// hands out each loop with its state; work posted to a loop from there
// looks its state up again with get(), since emplace() may replace it.
#pragma once

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "net/event_loop.h"

namespace tern::net {

template <typename T>
class LoopLocal {
 public:
  LoopLocal() : key_(EventLoop::new_slot_key()) {}
  LoopLocal(const LoopLocal&) = delete;
  LoopLocal& operator=(const LoopLocal&) = delete;

  // Makes `loop`'s T (replacing one it had: the old one is destroyed here,
  // on the loop's thread). Loop thread only.
  template <typename... Args>
  T& emplace(EventLoop* loop, Args&&... args) {
    auto made = std::make_unique<T>(std::forward<Args>(args)...);
    T& ref = *made;
    std::unique_ptr<T> old;
    {
      std::lock_guard lock(mu_);
      bool found = false;
      for (auto& [owner, value] : owned_) {
        if (owner == loop) {
          old = std::exchange(value, std::move(made));
          found = true;
          break;
        }
      }
      if (!found) owned_.emplace_back(loop, std::move(made));
    }
    loop->set_slot(key_, &ref);
    return ref;
  }

  // The T of `loop`, or of the calling thread's loop (current()); nullptr
  // if it has none. Loop thread only.
  T* get(const EventLoop* loop) const { return static_cast<T*>(loop->slot(key_)); }
  T* current() const {
    EventLoop* loop = EventLoop::current();
    return loop != nullptr ? get(loop) : nullptr;
  }

  // Calls f(loop, t) for each loop that has one. Any thread; the T must
  // only be touched on its loop (f typically posts there, see above).
  template <typename F>
  void for_each(F f) {
    std::lock_guard lock(mu_);
    for (auto& [loop, value] : owned_) f(loop, *value);
  }
  template <typename F>
  void for_each(F f) const {
    std::lock_guard lock(mu_);
    for (const auto& [loop, value] : owned_) f(loop, static_cast<const T&>(*value));
  }

 private:
  const size_t key_;
  mutable std::mutex mu_;  // guards owned_
  std::vector<std::pair<EventLoop*, std::unique_ptr<T>>> owned_;
};

}  // namespace tern::net
