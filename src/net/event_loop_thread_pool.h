// EventLoopThreadPool: N I/O loops on N threads, beside a base loop.
//
// With zero threads every request for a loop returns the base loop, so a
// single-threaded server needs no special case. Loops are picked round-robin
// or by least load (LoopLoad: live connections, plus recent traffic weighted
// so that kBytesPerConnection bytes of the last second count as one
// connection).
//
// The loops wait with the base loop's I/O backend (epoll or io_uring).
//
// Owned by TcpServer. Created and started on the base loop's thread; the
// pickers are called there too (the acceptor's loop).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tern::net {

class EventLoop;
class EventLoopThread;

class EventLoopThreadPool {
 public:
  using InitCallback = std::function<void(EventLoop*)>;  // runs on each loop's thread first
  // What the least-loaded policy counts as one connection's worth of recent bytes.
  static constexpr uint64_t kBytesPerConnection = 256 * 1024;

  // cpus: CPU for loop i is cpus[i % size]; empty for no pinning.
  EventLoopThreadPool(EventLoop* base_loop, std::string name, int threads,
                      std::vector<int> cpus = {});

  ~EventLoopThreadPool();
  EventLoopThreadPool(const EventLoopThreadPool&) = delete;
  EventLoopThreadPool& operator=(const EventLoopThreadPool&) = delete;

  // Starts the threads; init runs on each loop thread before its loop starts
  // (and on the base loop when there are no threads).
  void start(const InitCallback& init = {});
  bool started() const { return started_; }  // start() was called

  // Index into loops() of the next loop to use: each in turn, or the one
  // with the least load (connections, those handed to it, and recent bytes
  // at kBytesPerConnection each). Base loop thread, after start().
  size_t pick_round_robin();
  size_t pick_least_loaded();
  // The I/O loops (the base loop alone when there are no threads).
  const std::vector<EventLoop*>& loops() const { return loops_; }
  EventLoop* base_loop() const { return base_loop_; }  // the loop it was made with

 private:
  EventLoop* const base_loop_;
  const std::string name_;
  const int thread_count_;
  const std::vector<int> cpus_;
  bool started_ = false;
  size_t next_ = 0;
  std::vector<std::unique_ptr<EventLoopThread>> threads_;
  std::vector<EventLoop*> loops_;
};

}  // namespace tern::net
