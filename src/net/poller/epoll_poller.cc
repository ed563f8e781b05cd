#include "net/poller/epoll_poller.h"

#include <cerrno>
#include <cstring>

#include "base/assert.h"
#include "base/log.h"
#include "net/channel.h"

namespace tern::net {

EpollPoller::EpollPoller() : epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)), events_(128) {
  TERN_CHECK_MSG(epoll_fd_.valid(), "epoll_create1: {}", std::strerror(errno));
}

int EpollPoller::poll(int timeout_ms, std::vector<ReadyEvent>* ready) {
  int n = ::epoll_wait(epoll_fd_.fd(), events_.data(), static_cast<int>(events_.size()), timeout_ms);
  if (n < 0) {
    int err = errno;
    if (err != EINTR) TERN_LOG_ERROR("epoll_wait: {}", std::strerror(err));
    return 0;
  }
  for (int i = 0; i < n; ++i) {
    ready->push_back({static_cast<Channel*>(events_[static_cast<size_t>(i)].data.ptr),
                      events_[static_cast<size_t>(i)].events});
  }
  // A full array means more may be waiting: take more next time.
  if (static_cast<size_t>(n) == events_.size() && events_.size() < 4096) {
    events_.resize(events_.size() * 2);
  }
  return n;
}

void EpollPoller::update_channel(Channel* channel) {
  using State = Channel::PollerState;
  const bool wants_events = !channel->is_none_event();
  switch (channel->poller_state()) {
    case State::kNew:
    case State::kDetached:
      if (!wants_events) return;
      control(EPOLL_CTL_ADD, channel);
      channel->set_poller_state(State::kAdded);
      return;
    case State::kAdded:
      if (wants_events) {
        control(EPOLL_CTL_MOD, channel);
      } else {
        control(EPOLL_CTL_DEL, channel);
        channel->set_poller_state(State::kDetached);
      }
      return;
  }
}

void EpollPoller::remove_channel(Channel* channel) {
  if (channel->poller_state() == Channel::PollerState::kAdded) control(EPOLL_CTL_DEL, channel);
  channel->set_poller_state(Channel::PollerState::kNew);
}

void EpollPoller::control(int op, Channel* channel) {
  epoll_event event{};
  event.events = channel->poller_events();
  event.data.ptr = channel;
  if (::epoll_ctl(epoll_fd_.fd(), op, channel->fd(), &event) != 0) {
    int err = errno;
    // Failing to register or modify is a bug (bad fd, double add); failing to
    // delete an fd the peer already reset is not worth dying for.
    TERN_CHECK_MSG(op == EPOLL_CTL_DEL, "epoll_ctl op {} fd {}: {}", op, channel->fd(),
                   std::strerror(err));
    TERN_LOG_DEBUG("epoll_ctl DEL fd {}: {}", channel->fd(), std::strerror(err));
  }
}

}  // namespace tern::net
