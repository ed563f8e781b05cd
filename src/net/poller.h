// Poller: the interface an EventLoop uses to wait for I/O readiness.
//
// One implementation today (poller/epoll_poller.h). The interface is kept to
// what an io_uring poll-based backend could also provide: register, modify
// and remove interest, and wait. Owned by its EventLoop; loop thread only.
#pragma once

#include <memory>
#include <vector>

namespace tern::net {

class Channel;

struct ReadyEvent {
  Channel* channel;
  uint32_t revents;
};

class Poller {
 public:
  virtual ~Poller() = default;

  // Waits up to timeout_ms (-1: forever) and appends ready channels to *ready.
  // Returns the number appended; 0 on timeout or EINTR.
  virtual int poll(int timeout_ms, std::vector<ReadyEvent>* ready) = 0;

  // Adds or modifies the registration to match channel->poller_events().
  // A channel with no events is detached from the kernel but remembered.
  virtual void update_channel(Channel* channel) = 0;
  virtual void remove_channel(Channel* channel) = 0;

  static std::unique_ptr<Poller> create_default();
};

}  // namespace tern::net
