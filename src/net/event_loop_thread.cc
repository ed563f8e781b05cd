#include "net/event_loop_thread.h"

#include <pthread.h>

#include "base/cpu_affinity.h"
#include "base/log.h"
#include "net/event_loop.h"

namespace tern::net {

EventLoopThread::EventLoopThread(std::string name, int cpu, InitCallback init, IoBackend io)
    : name_(std::move(name)), cpu_(cpu), io_(io), init_(std::move(init)) {}

EventLoopThread::~EventLoopThread() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    if (loop_ != nullptr) loop_->quit();
  }
  thread_.join();
}

EventLoop* EventLoopThread::start() {
  thread_ = std::thread([this] { thread_main(); });
  std::unique_lock lock(mu_);
  ready_.wait(lock, [this] { return loop_ != nullptr; });
  return loop_;
}

void EventLoopThread::thread_main() {
  // Linux limits thread names to 15 characters.
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  if (cpu_ >= 0) {
    if (auto r = pin_current_thread(cpu_); !r) {
      TERN_LOG_WARN("{}: cannot pin to CPU {}: {}", name_, cpu_, r.error().message());
    }
  }
  EventLoop loop(io_);
  if (init_) init_(&loop);
  {
    std::lock_guard lock(mu_);
    loop_ = &loop;
  }
  ready_.notify_one();
  loop.loop();
  std::lock_guard lock(mu_);
  loop_ = nullptr;
}

}  // namespace tern::net
