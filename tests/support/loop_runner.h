// Test support: an EventLoop on its own thread, and a way to run code on it
// and wait for the result. Tests use it to host servers and clients while the
// test body acts as a remote peer.
#pragma once

#include <future>
#include <memory>
#include <type_traits>

#include "net/event_loop.h"
#include "net/event_loop_thread.h"

namespace tern::testing {

class LoopRunner {
 public:
  explicit LoopRunner(net::IoBackend io = net::IoBackend::kDefault)
      : thread_(std::make_unique<net::EventLoopThread>("test-loop", -1, nullptr, io)) {
    loop_ = thread_->start();
  }
  ~LoopRunner() { thread_.reset(); }

  net::EventLoop* loop() const { return loop_; }

  // Runs f on the loop thread and returns its result.
  template <typename F>
  auto run(F&& f) -> std::invoke_result_t<F> {
    using R = std::invoke_result_t<F>;
    std::promise<R> promise;
    auto future = promise.get_future();
    loop_->run_in_loop([&] {
      if constexpr (std::is_void_v<R>) {
        f();
        promise.set_value();
      } else {
        promise.set_value(f());
      }
    });
    return future.get();
  }

 private:
  std::unique_ptr<net::EventLoopThread> thread_;
  net::EventLoop* loop_ = nullptr;
};

// Deletes on the runner's loop thread: loop-bound objects (servers, clients)
// must die there, even when a failed ASSERT leaves a test early.
struct LoopDeleter {
  LoopRunner* runner = nullptr;
  template <typename T>
  void operator()(T* object) const {
    runner->run([object] { delete object; });
  }
};
template <typename T>
using LoopOwned = std::unique_ptr<T, LoopDeleter>;

// Constructs a T on the runner's loop thread.
template <typename T, typename... Args>
LoopOwned<T> make_on_loop(LoopRunner& runner, Args&&... args) {
  T* object = runner.run([&] { return new T(std::forward<Args>(args)...); });
  return LoopOwned<T>(object, LoopDeleter{&runner});
}

}  // namespace tern::testing
