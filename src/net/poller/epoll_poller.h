// EpollPoller: Poller on Linux epoll. Each channel is registered with its
// address in epoll_event.data, so a ready event leads straight to its handler
// without a lookup. Owned by one EventLoop; loop thread only.
#pragma once

#include <sys/epoll.h>

#include <vector>

#include "net/poller.h"
#include "net/socket.h"

namespace tern::net {

class EpollPoller final : public Poller {
 public:
  EpollPoller();

  int poll(int timeout_ms, std::vector<ReadyEvent>* ready) override;
  void update_channel(Channel* channel) override;
  void remove_channel(Channel* channel) override;
  IoBackend backend() const override { return IoBackend::kEpoll; }

 private:
  void control(int op, Channel* channel);

  Socket epoll_fd_;  // Socket only for its close-on-destroy
  std::vector<epoll_event> events_;
};

}  // namespace tern::net
