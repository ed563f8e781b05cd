#include "base/task_pool.h"

#include <pthread.h>

namespace tern {

TaskPool::TaskPool(std::string name, size_t threads, size_t max_queued)
    : name_(std::move(name)), max_queued_(max_queued) {
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) {
    threads_.emplace_back([this, i] {
      // Shows in top -H and in debuggers; 15 characters at most.
      std::string thread_name = (name_ + std::to_string(i)).substr(0, 15);
      pthread_setname_np(pthread_self(), thread_name.c_str());
      run();
    });
  }
}

TaskPool::~TaskPool() { shutdown(); }

void TaskPool::shutdown() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

bool TaskPool::submit(Task task) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || queue_.size() >= max_queued_) return false;
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

size_t TaskPool::discard_queued() {
  std::deque<Task> dropped;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
  return dropped.size();  // destroyed here, outside the lock
}

size_t TaskPool::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

void TaskPool::run() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace tern
