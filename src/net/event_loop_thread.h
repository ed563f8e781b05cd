// EventLoopThread: a thread that runs one EventLoop.
//
// start() launches the thread, which creates its loop on its own stack,
// optionally pins itself to a CPU, runs the init callback and then the loop;
// start() returns the loop once it exists. The destructor quits the loop and
// joins the thread, so the loop and every connection on it are gone when it
// returns.
//
// Owned by EventLoopThreadPool (or the user). start() and the destructor are
// called from the owning thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "net/poller.h"

namespace tern::net {

class EventLoop;

class EventLoopThread {
 public:
  using InitCallback = std::function<void(EventLoop*)>;  // runs on the thread before its loop does

  // cpu < 0: no pinning. io: the loop's backend (net/poller.h).
  explicit EventLoopThread(std::string name, int cpu = -1, InitCallback init = {},
                           IoBackend io = IoBackend::kDefault);
  // Quits the loop, if it runs, and joins the thread.
  ~EventLoopThread();

  EventLoopThread(const EventLoopThread&) = delete;
  EventLoopThread& operator=(const EventLoopThread&) = delete;

  EventLoop* start();  // starts the thread; returns its loop once it runs

 private:
  void thread_main();

  const std::string name_;
  const int cpu_;
  const IoBackend io_;
  InitCallback init_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable ready_;
  EventLoop* loop_ = nullptr;  // guarded by mu_ until published
};

}  // namespace tern::net
