#include "net/channel.h"

#include <sys/epoll.h>

#include "base/assert.h"
#include "net/event_loop.h"

namespace tern::net {

static_assert(Channel::kReadEvents == (EPOLLIN | EPOLLPRI | EPOLLRDHUP));
static_assert(Channel::kWriteEvents == EPOLLOUT);

Channel::Channel(EventLoop* loop, int fd) : loop_(loop), fd_(fd) {}

Channel::~Channel() {
  // Destroying a registered channel would leave a dangling pointer in epoll.
  TERN_CHECK_MSG(poller_state_ != PollerState::kAdded, "channel for fd {} destroyed while registered", fd_);
  // An owner destroyed by a handler earlier in the same round (an Acceptor
  // on a stop signal) may leave an event behind; the loop must skip it.
  // Asked through current(), so that a channel outliving its loop does not
  // touch the loop's memory.
  if (EventLoop* loop = EventLoop::current(); loop == loop_) {
    if (poller_state_ == PollerState::kDetached) loop->remove_channel(this);
    if (loop->dispatching()) loop->forget_ready(this);
  }
}

void Channel::reset(int fd) {
  TERN_CHECK(poller_state_ != PollerState::kAdded);
  // A detached channel may still be known to the poller under its old fd.
  if (poller_state_ == PollerState::kDetached) loop_->remove_channel(this);
  fd_ = fd;
  ++epoch_;
  events_ = 0;
  poller_state_ = PollerState::kNew;
  edge_triggered_ = false;
  reads_itself_ = false;
  peer_end_reported_ = false;
}

void Channel::set_reads_itself(bool on) {
  if (reads_itself_ == on) return;
  reads_itself_ = on;
  if (poller_state_ == PollerState::kAdded) loop_->update_channel(this);
}

void Channel::set_edge_triggered(bool on) {
  if (edge_triggered_ == on) return;
  edge_triggered_ = on;
  if (!is_none_event()) update(events_);
}

uint32_t Channel::poller_events() const {
  return events_ | (edge_triggered_ ? static_cast<uint32_t>(EPOLLET) : 0u);
}

void Channel::update(uint32_t events) {
  events_ = events;
  loop_->update_channel(this);
}

void Channel::remove() {
  events_ = 0;
  loop_->remove_channel(this);
}

void Channel::forget() {
  events_ = 0;
  loop_->forget_channel(this);
}

void Channel::handle_event(uint32_t revents) {
  // Ordering follows redis ae: readable before writable, so a reply produced
  // by the read handler can be written in the same round. Each step checks
  // the channel again: a handler may have closed it, in which case the rest
  // of the event is dropped (the owner object stays alive until the round
  // ends, see EventLoop), or rebound it to a new fd, in which case the event
  // belongs to the old one. An error comes before a hang-up: a reset
  // reported to a channel that polls for output alone comes as both, and
  // it is the error that says why the connection ended.
  const uint32_t epoch = epoch_;
  auto live = [this, epoch] { return epoch == epoch_ && !is_none_event(); };
  peer_end_reported_ = (revents & (EPOLLRDHUP | EPOLLHUP)) != 0;
  if (const ChannelHandler* h = handler_) {
    if ((revents & EPOLLERR) && live()) h->error(owner_);
    if ((revents & EPOLLHUP) && !(revents & EPOLLIN) && live()) h->hangup(owner_);
    if ((revents & (EPOLLIN | EPOLLPRI | EPOLLRDHUP)) && live() && is_reading()) h->readable(owner_);
    if ((revents & EPOLLOUT) && live()) h->writable(owner_);
    return;
  }
  if (!callbacks_) return;
  const Callbacks& cb = *callbacks_;
  if (revents & EPOLLERR) {
    if (cb.error && live()) cb.error();
  }
  if ((revents & EPOLLHUP) && !(revents & EPOLLIN)) {
    if (cb.close && live()) cb.close();
  }
  if (revents & (EPOLLIN | EPOLLPRI | EPOLLRDHUP)) {
    if (cb.read && live() && is_reading()) cb.read();
  }
  if (revents & EPOLLOUT) {
    if (cb.write && live()) cb.write();
  }
}

Channel::Callbacks& Channel::callbacks() {
  if (!callbacks_) callbacks_ = std::make_unique<Callbacks>();
  return *callbacks_;
}

}  // namespace tern::net
