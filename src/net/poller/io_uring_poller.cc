#include "net/poller/io_uring_poller.h"

#include <sys/epoll.h>

#include <cerrno>
#include <cstring>

#include "base/assert.h"
#include "base/log.h"
#include "net/channel.h"

namespace tern::net {
namespace {

// Submission entries are flushed to the kernel with each wait; a round that
// queues more than this submits early. Completions: room for a busy round of
// many connections (the kernel keeps what overflows and ends multishot
// requests, which are then re-armed).
constexpr unsigned kSubmissionEntries = 1024;
constexpr unsigned kCompletionEntries = 16384;

// user_data: generation << 32 | fd. Zero marks requests whose completion
// means nothing (cancellations).
constexpr uint64_t kIgnored = 0;

uint64_t user_data(uint32_t generation, int fd) {
  return static_cast<uint64_t>(generation) << 32 | static_cast<uint32_t>(fd);
}

int setup_ring(io_uring* ring) {
  // Fastest first; older kernels refuse the newer flags with EINVAL.
  const unsigned attempts[] = {
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
      IORING_SETUP_COOP_TASKRUN,
      0,
  };
  int ret = -EINVAL;
  for (unsigned flags : attempts) {
    io_uring_params params{};
    params.flags = flags | IORING_SETUP_CQSIZE;
    params.cq_entries = kCompletionEntries;
    ret = io_uring_queue_init_params(kSubmissionEntries, ring, &params);
    if (ret != -EINVAL) return ret;
  }
  return ret;
}

}  // namespace

std::unique_ptr<IoUringPoller> IoUringPoller::create(int* err) {
  std::unique_ptr<IoUringPoller> poller(new IoUringPoller());
  int ret = setup_ring(&poller->ring_);
  if (ret < 0) {
    *err = -ret;
    poller->ring_.ring_fd = -1;
    return nullptr;
  }
  // Sized so that steady state does not allocate (fds grow the table).
  poller->registrations_.resize(1024);
  poller->completed_.reserve(1024);
  return poller;
}

IoUringPoller::~IoUringPoller() {
  // Closing the ring cancels what is still in flight.
  if (ring_.ring_fd >= 0) io_uring_queue_exit(&ring_);
}

IoUringPoller::Registration& IoUringPoller::registration(int fd) {
  TERN_DCHECK(fd >= 0);
  auto index = static_cast<size_t>(fd);
  if (index >= registrations_.size()) registrations_.resize(index + 1 + index / 2);
  return registrations_[index];
}

io_uring_sqe* IoUringPoller::next_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe != nullptr) return sqe;
  // The queue is full: hand it to the kernel now, without waiting.
  int ret = io_uring_submit(&ring_);
  if (ret < 0) TERN_LOG_ERROR("io_uring_submit: {}", std::strerror(-ret));
  sqe = io_uring_get_sqe(&ring_);
  TERN_CHECK_MSG(sqe != nullptr, "io_uring submission queue stays full");
  return sqe;
}

void IoUringPoller::arm(int fd, Registration& reg, Channel* channel) {
  const uint32_t events = channel->events();
  const bool multishot = channel->edge_triggered();
  reg.channel = channel;
  reg.generation = next_generation_++;
  if (next_generation_ == 0) next_generation_ = 1;
  reg.armed_events = events;
  reg.multishot = multishot;
  reg.armed = true;
  io_uring_sqe* sqe = next_sqe();
  if (multishot) {
    io_uring_prep_poll_multishot(sqe, fd, events);
  } else {
    io_uring_prep_poll_add(sqe, fd, events);
  }
  io_uring_sqe_set_data64(sqe, user_data(reg.generation, fd));
}

void IoUringPoller::cancel(Registration& reg, int fd) {
  if (reg.armed) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_poll_remove(sqe, user_data(reg.generation, fd));
    io_uring_sqe_set_data64(sqe, kIgnored);
  }
  reg.armed = false;
  reg.generation = 0;  // whatever the old request still reports is dropped
}

void IoUringPoller::update_channel(Channel* channel) {
  using State = Channel::PollerState;
  const int fd = channel->fd();
  Registration& reg = registration(fd);
  const bool wants_events = !channel->is_none_event();
  switch (channel->poller_state()) {
    case State::kNew:
    case State::kDetached:
      if (!wants_events) return;
      arm(fd, reg, channel);
      channel->set_poller_state(State::kAdded);
      return;
    case State::kAdded:
      if (!wants_events) {
        cancel(reg, fd);
        reg.channel = nullptr;
        channel->set_poller_state(State::kDetached);
        return;
      }
      if (reg.armed) {
        if (reg.armed_events == channel->events() && reg.multishot == channel->edge_triggered()) {
          return;
        }
        cancel(reg, fd);
      }
      arm(fd, reg, channel);
      return;
  }
}

void IoUringPoller::remove_channel(Channel* channel) {
  if (channel->poller_state() == Channel::PollerState::kAdded) {
    Registration& reg = registration(channel->fd());
    const bool armed = reg.armed;
    cancel(reg, channel->fd());
    reg.channel = nullptr;
    // The poll request holds the file open: a listener closed after this
    // must be closed when its owner's destructor returns (a port rebound
    // at once, a client that expects a refusal), so the cancellation goes
    // to the kernel now, and its completion work runs now too.
    if (armed) {
      int ret = io_uring_submit_and_get_events(&ring_);
      if (ret < 0) TERN_LOG_ERROR("io_uring_submit: {}", std::strerror(-ret));
    }
  }
  channel->set_poller_state(Channel::PollerState::kNew);
}

void IoUringPoller::forget_channel(Channel* channel) {
  // A connection's close: its cancellation goes with the round's batch, a
  // moment later. The descriptor number is free at once; the peer sees the
  // close when the loop next enters the kernel, at the end of this round.
  if (channel->poller_state() == Channel::PollerState::kAdded) {
    Registration& reg = registration(channel->fd());
    cancel(reg, channel->fd());
    reg.channel = nullptr;
  }
  channel->set_poller_state(Channel::PollerState::kNew);
}

void IoUringPoller::rearm_completed() {
  // One-shot requests that completed last round (and multishot ones the
  // kernel ended) are armed again for channels that still want events; a
  // request armed on a ready file completes at once.
  for (int fd : completed_) {
    Registration& reg = registrations_[static_cast<size_t>(fd)];
    if (reg.channel == nullptr || reg.armed || reg.channel->is_none_event()) continue;
    arm(fd, reg, reg.channel);
  }
  completed_.clear();
}

int IoUringPoller::poll(int timeout_ms, std::vector<ReadyEvent>* ready) {
  rearm_completed();
  ++round_;
  io_uring_cqe* cqe = nullptr;
  int ret;
  if (timeout_ms < 0) {
    ret = io_uring_submit_and_wait(&ring_, 1);
  } else {
    __kernel_timespec ts{};
    ts.tv_sec = timeout_ms / 1000;
    ts.tv_nsec = static_cast<long long>(timeout_ms % 1000) * 1000000;
    ret = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
  }
  if (ret < 0 && ret != -ETIME && ret != -EINTR && ret != -EBUSY && ret != -EAGAIN) {
    TERN_LOG_ERROR("io_uring wait: {}", std::strerror(-ret));
  }
  int count = 0;
  collect(ready, &count);
  return count;
}

void IoUringPoller::collect(std::vector<ReadyEvent>* ready, int* count) {
  io_uring_cqe* cqe = nullptr;
  unsigned head = 0;
  unsigned seen = 0;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    ++seen;
    const uint64_t data = io_uring_cqe_get_data64(cqe);
    if (data == kIgnored) continue;
    const auto fd = static_cast<int>(data & 0xffffffffu);
    const auto generation = static_cast<uint32_t>(data >> 32);
    if (static_cast<size_t>(fd) >= registrations_.size()) continue;
    Registration& reg = registrations_[static_cast<size_t>(fd)];
    if (reg.generation != generation || reg.channel == nullptr) continue;  // stale
    if (!(cqe->flags & IORING_CQE_F_MORE)) {
      reg.armed = false;
      completed_.push_back(fd);
    }
    uint32_t revents;
    if (cqe->res >= 0) {
      revents = static_cast<uint32_t>(cqe->res);
    } else if (cqe->res == -ECANCELED) {
      continue;  // a multishot request the kernel ended: re-armed next round
    } else {
      TERN_LOG_DEBUG("io_uring poll fd {}: {}", fd, std::strerror(-cqe->res));
      revents = EPOLLERR;
    }
    if (revents == 0) continue;
    if (reg.round == round_ && reg.ready_index < ready->size() &&
        (*ready)[reg.ready_index].channel == reg.channel) {
      (*ready)[reg.ready_index].revents |= revents;
      continue;
    }
    reg.round = round_;
    reg.ready_index = static_cast<uint32_t>(ready->size());
    ready->push_back({reg.channel, revents});
    ++*count;
  }
  io_uring_cq_advance(&ring_, seen);
}

}  // namespace tern::net
