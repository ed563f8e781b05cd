// TaskPool: a fixed set of threads for blocking work (a database query, a
// password hash), so that I/O loops never wait on it.
//
//   TaskPool pool("task", 4, 1024);
//   bool queued = pool.submit([=] {
//     auto result = store->find_user(name, &user);        // blocks: fine here
//     loop->run_in_loop([=] { answer(result); });         // back to the loop
//   });
//   if (!queued) answer_503();                            // overloaded
//
// The queue is bounded: submit() refuses work beyond max_queued instead of
// letting a slow database turn into unbounded memory. Tasks run in FIFO
// order on whichever thread is free. The destructor runs what is queued,
// then joins; discard_queued() first drops what has not started (a second
// stop signal: exit now). Thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tern {

class TaskPool {
 public:
  using Task = std::function<void()>;  // one job, run on one of the threads

  // Starts `threads` threads named name0, name1, ... (cut to 15
  // characters); at most `max_queued` tasks wait for them.
  TaskPool(std::string name, size_t threads, size_t max_queued);
  // shutdown(), if it has not run.
  ~TaskPool();

  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  // Queues `task` for a thread; false when the queue is full (or the pool
  // is stopping).
  bool submit(Task task);
  size_t threads() const { return threads_.size(); }  // how many it started
  size_t queued() const;  // tasks waiting for a thread
  // Drops the tasks that have not started, refuses new ones, and returns
  // how many were dropped. Running tasks finish.
  size_t discard_queued();
  // Runs what is queued, refuses new tasks, and joins the threads; the
  // object stays usable (submit() returns false). The destructor's first
  // step; call it first where threads that submit outlive the threads
  // that run. Not from a task.
  void shutdown();

 private:
  void run();

  const std::string name_;
  const size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;  // guarded by mu_
  bool stopping_ = false;   // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace tern
