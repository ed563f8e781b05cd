#include "net/poller/io_uring_poller.h"

#include <sys/epoll.h>
#include <sys/mman.h>

#include <algorithm>
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

// user_data: generation << 32 | kind | fd. Poll requests: bits 30-31 clear,
// fd in bits 0-29. Receives: bit 31, the request's sequence in bits 24-29,
// fd in bits 0-23; sends: bits 30 and 31, fd in bits 0-23 (a higher fd
// polls and reads and writes itself). Zero: requests whose completion means
// nothing (cancellations).
constexpr uint64_t kIgnored = 0;
constexpr uint32_t kRecvBit = 1u << 31;
constexpr uint32_t kSendBits = 3u << 30;
constexpr int kMaxRecvFd = (1 << 24) - 1;

uint64_t poll_data(uint32_t generation, int fd) {
  return static_cast<uint64_t>(generation) << 32 | static_cast<uint32_t>(fd);
}

uint64_t recv_data(uint32_t generation, uint8_t sequence, int fd) {
  return static_cast<uint64_t>(generation) << 32 | kRecvBit |
         static_cast<uint32_t>(sequence & 0x3f) << 24 | static_cast<uint32_t>(fd);
}

uint64_t send_data(uint32_t generation, int fd) {
  return static_cast<uint64_t>(generation) << 32 | kSendBits | static_cast<uint32_t>(fd);
}

constexpr uint32_t kInputEvents = EPOLLIN | EPOLLPRI | EPOLLRDHUP;

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
  if (!poller->setup_buffers()) {
    TERN_LOG_DEBUG("io_uring: no provided buffer rings; connections poll for input");
  }
  // Sized so that steady state does not allocate (fds grow the table).
  poller->completed_.reserve(1024);
  poller->lent_.reserve(kBuffers);
  return poller;
}

IoUringPoller::~IoUringPoller() {
  // Closing the ring cancels what is still in flight.
  if (ring_.ring_fd >= 0) io_uring_queue_exit(&ring_);
  if (buffer_ring_ != nullptr) {
    ::munmap(buffer_ring_, kBuffers * sizeof(io_uring_buf));
    ::munmap(buffers_, static_cast<size_t>(max_buffers_) * buffer_size_);
  }
}

IoUringPoller::Registration& IoUringPoller::registration(int fd) {
  TERN_DCHECK(fd >= 0);
  const auto page = static_cast<size_t>(fd) >> kPageShift;
  if (page >= pages_.size()) pages_.resize(page + 1);
  if (!pages_[page]) pages_[page] = std::make_unique<Registration[]>(size_t{1} << kPageShift);
  return pages_[page][static_cast<size_t>(fd) & ((size_t{1} << kPageShift) - 1)];
}

IoUringPoller::Registration* IoUringPoller::find(int fd) {
  if (fd < 0) return nullptr;
  const auto page = static_cast<size_t>(fd) >> kPageShift;
  if (page >= pages_.size() || !pages_[page]) return nullptr;
  return &pages_[page][static_cast<size_t>(fd) & ((size_t{1} << kPageShift) - 1)];
}

uint32_t IoUringPoller::next_generation() {
  uint32_t generation = next_generation_++;
  if (next_generation_ == 0) next_generation_ = 1;
  return generation;
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

void IoUringPoller::arm_poll(int fd, Registration& reg, uint32_t events, bool multishot) {
  reg.poll_generation = next_generation();
  TERN_DCHECK(events <= UINT16_MAX);
  reg.poll_events = static_cast<uint16_t>(events);
  reg.multishot = multishot;
  reg.poll_armed = true;
  io_uring_sqe* sqe = next_sqe();
  if (multishot) {
    io_uring_prep_poll_multishot(sqe, fd, events);
  } else {
    io_uring_prep_poll_add(sqe, fd, events);
  }
  io_uring_sqe_set_data64(sqe, poll_data(reg.poll_generation, fd));
}

void IoUringPoller::arm_recv(int fd, Registration& reg) {
  ++reg.recv_sequence;
  reg.recv_armed = true;
  io_uring_sqe* sqe = next_sqe();
  io_uring_prep_recv_multishot(sqe, fd, nullptr, incremental_ ? kMaxReceive : 0, 0);
  sqe->flags |= IOSQE_BUFFER_SELECT;
  sqe->buf_group = kBufferGroup;
  io_uring_sqe_set_data64(sqe, recv_data(reg.generation, reg.recv_sequence, fd));
}

void IoUringPoller::cancel(uint64_t data) {
  io_uring_sqe* sqe = next_sqe();
  io_uring_prep_cancel64(sqe, data, 0);
  io_uring_sqe_set_data64(sqe, kIgnored);
}

void IoUringPoller::sync(int fd, Registration& reg) {
  Channel* channel = reg.channel;
  const uint32_t events = channel->poller_state() == Channel::PollerState::kAdded ? channel->events() : 0;
  const bool receives = receives_for(*channel, fd);
  const bool want_recv = receives && (events & kInputEvents) != 0;
  const bool multishot = channel->edge_triggered();

  if (want_recv && !reg.recv_armed) {
    arm_recv(fd, reg);
  } else if (!want_recv && reg.recv_armed) {
    // Bytes it received before the cancellation still reach the channel;
    // if it goes on to read for itself, it is told it is readable only
    // once the receive has ended (a read before could overtake them).
    cancel(recv_data(reg.generation, reg.recv_sequence, fd));
    reg.recv_armed = false;
    reg.recv_ending = true;
  }
  const uint32_t poll_events = receives || reg.recv_ending ? events & ~kInputEvents : events;
  if (reg.poll_armed && (reg.poll_events != poll_events || reg.multishot != multishot)) {
    cancel(poll_data(reg.poll_generation, fd));
    reg.poll_armed = false;
    reg.poll_generation = 0;  // whatever the old request still reports is dropped
  }
  if (poll_events != 0 && !reg.poll_armed) arm_poll(fd, reg, poll_events, multishot);
}

void IoUringPoller::update_channel(Channel* channel) {
  using State = Channel::PollerState;
  const int fd = channel->fd();
  Registration& reg = registration(fd);
  const bool wants_events = !channel->is_none_event();
  if (channel->poller_state() != State::kAdded) {
    if (!wants_events) return;
    if (reg.channel != channel) {
      // A new registration (or a detached channel's successor on this fd).
      if (reg.channel != nullptr) unregister(fd, reg);
      reg.channel = channel;
      reg.generation = next_generation();
      channel->set_sends_by_poller(fd <= kMaxRecvFd && channel->takes_sent());
    }
    channel->set_poller_state(State::kAdded);
    sync(fd, reg);
    return;
  }
  if (!wants_events) channel->set_poller_state(State::kDetached);
  // Detached, the channel stays in the table: a receive being cancelled may
  // still hand it bytes.
  sync(fd, reg);
}

void IoUringPoller::unregister(int fd, Registration& reg) {
  // The owner abandons a send in flight before it lets go of the channel.
  TERN_CHECK_MSG(!reg.send_armed, "fd {} unregistered with a send in flight", fd);
  if (reg.poll_armed) cancel(poll_data(reg.poll_generation, fd));
  if (reg.recv_armed) cancel(recv_data(reg.generation, reg.recv_sequence, fd));
  if (reg.channel != nullptr) reg.channel->set_sends_by_poller(false);
  reg = Registration{};
}

bool IoUringPoller::drop(Channel* channel) {
  channel->set_poller_state(Channel::PollerState::kNew);
  const int fd = channel->fd();
  Registration* found = find(fd);
  if (found == nullptr || found->channel != channel) return false;
  Registration& reg = *found;
  const bool armed = reg.poll_armed || reg.recv_armed || reg.recv_ending;
  unregister(fd, reg);
  return armed;
}

void IoUringPoller::remove_channel(Channel* channel) {
  // A request holds the file open: a listener closed after this must be
  // closed when its owner's destructor returns (a port rebound at once, a
  // client that expects a refusal), so the cancellation goes to the kernel
  // now, and its completion work runs now too.
  if (drop(channel)) {
    int ret = io_uring_submit_and_get_events(&ring_);
    if (ret < 0) TERN_LOG_ERROR("io_uring_submit: {}", std::strerror(-ret));
  }
}

void IoUringPoller::forget_channel(Channel* channel) {
  // A connection's close: its cancellation goes with the round's batch, a
  // moment later. The descriptor number is free at once; the peer sees the
  // close when the loop next enters the kernel, at the end of this round.
  drop(channel);
}

bool IoUringPoller::receives_for(const Channel& channel, int fd) const {
  return buffer_ring_ != nullptr && fd <= kMaxRecvFd && channel.takes_received();
}

bool IoUringPoller::can_send(const Channel& channel) const {
  // Set while the channel is registered here (update_channel, unregister).
  return channel.sends_by_poller();
}

void IoUringPoller::start_send(Channel& channel, const char* data, size_t length, bool more) {
  const int fd = channel.fd();
  Registration& reg = registration(fd);
  TERN_CHECK(reg.channel == &channel && !reg.send_armed);
  reg.send_armed = true;
  io_uring_sqe* sqe = next_sqe();
  io_uring_prep_send(sqe, fd, data, length, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
  io_uring_sqe_set_data64(sqe, send_data(reg.generation, fd));
}

void IoUringPoller::abandon_send(Channel& channel, Buffer&& bytes) {
  const int fd = channel.fd();
  Registration& reg = registration(fd);
  TERN_CHECK(reg.channel == &channel && reg.send_armed);
  const uint64_t data = send_data(reg.generation, fd);
  cancel(data);
  reg.send_armed = false;
  orphans_.emplace_back(data, std::move(bytes));
}

void IoUringPoller::collect_send(const io_uring_cqe& cqe, std::vector<ReadyEvent>* ready,
                                 int* count) {
  const uint64_t data = io_uring_cqe_get_data64(&cqe);
  for (size_t i = 0; i < orphans_.size(); ++i) {
    if (orphans_[i].first != data) continue;
    orphans_[i] = std::move(orphans_.back());  // the kernel is done with the bytes
    orphans_.pop_back();
    return;
  }
  const auto fd = static_cast<int>(data & 0xffffffu);
  const auto generation = static_cast<uint32_t>(data >> 32);
  Registration* found = find(fd);
  if (found == nullptr) return;
  Registration& reg = *found;
  if (reg.channel == nullptr || reg.generation != generation || !reg.send_armed) return;
  reg.send_armed = false;
  ready->push_back({reg.channel, ReadyEvent::kSent, cqe.res, nullptr});
  ++*count;
}

void IoUringPoller::rearm_completed() {
  // One-shot polls that completed last round, and multishot requests the
  // kernel ended, are armed again where their channel still wants them; a
  // poll armed on a ready file completes at once.
  for (int fd : completed_) {
    Registration& reg = *find(fd);  // completed_ holds registered fds only
    if (reg.channel != nullptr) sync(fd, reg);
  }
  completed_.clear();
}

int IoUringPoller::poll(int timeout_ms, std::vector<ReadyEvent>* ready) {
  grew_this_round_ = false;
  return_lent_buffers();
  rearm_completed();
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
    if ((data & kSendBits) == kSendBits) {
      collect_send(*cqe, ready, count);
      continue;
    }
    if (data & kRecvBit) {
      collect_recv(*cqe, ready, count);
      continue;
    }
    const auto fd = static_cast<int>(data & 0x3fffffffu);
    const auto generation = static_cast<uint32_t>(data >> 32);
    Registration* found = find(fd);
    if (found == nullptr) continue;
    Registration& reg = *found;
    if (reg.poll_generation != generation || reg.channel == nullptr) continue;  // stale
    if (!(cqe->flags & IORING_CQE_F_MORE)) {
      reg.poll_armed = false;
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
    // Input of a receiving channel is the receive's to report (its end of
    // stream and errors too). A channel that reads for itself learns of
    // it from its poll for input, not from one without: the receive it
    // gave up may still be ending, or have ended this round, its poll for
    // input armed next round (which then reports the end).
    const bool input_polled = (reg.poll_events & kInputEvents) != 0;
    if (receives_for(*reg.channel, fd) || reg.recv_ending || (reg.channel->reads_itself() && !input_polled)) {
      revents &= ~(kInputEvents | EPOLLHUP);
    }
    if (revents == 0) continue;
    // The list is new each round, and a channel has at most one poll entry
    // in it (beside its receives and sends): a poll entry of this channel
    // at the index it noted is this round's.
    if (reg.ready_index < ready->size() && (*ready)[reg.ready_index].channel == reg.channel &&
        ((*ready)[reg.ready_index].revents & (ReadyEvent::kReceived | ReadyEvent::kSent)) == 0) {
      (*ready)[reg.ready_index].revents |= revents;
      continue;
    }
    reg.ready_index = static_cast<uint32_t>(ready->size());
    ready->push_back({reg.channel, revents});
    ++*count;
  }
  io_uring_cq_advance(&ring_, seen);
}

void IoUringPoller::collect_recv(const io_uring_cqe& cqe, std::vector<ReadyEvent>* ready,
                                 int* count) {
  const uint64_t data = io_uring_cqe_get_data64(&cqe);
  const auto fd = static_cast<int>(data & 0xffffffu);
  const auto sequence = static_cast<uint8_t>((data >> 24) & 0x3f);
  const auto generation = static_cast<uint32_t>(data >> 32);
  // Its buffer goes back to the ring next round, whatever becomes of them.
  const char* bytes = take_bytes(cqe);
  Registration* reg = find(fd);
  if (reg == nullptr || reg->channel == nullptr || reg->generation != generation) {
    return;  // the channel is gone (closed): its bytes with it
  }
  if (!(cqe.flags & IORING_CQE_F_MORE) && (reg->recv_armed || reg->recv_ending) &&
      (reg->recv_sequence & 0x3f) == sequence) {
    // Ended (end of stream, an error, no buffer, cancelled): re-armed if
    // wanted, or input polled for where the channel reads for itself now.
    reg->recv_armed = reg->recv_ending = false;
    completed_.push_back(fd);
  }
  if (cqe.res == -ENOBUFS && !grew_this_round_ && buffers_in_use_ < max_buffers_) {
    grew_this_round_ = true;  // the other receives that found it empty wanted the same
    grow_buffers(buffers_in_use_);
    TERN_LOG_DEBUG("io_uring: {} receive buffers of {} bytes", buffers_in_use_, buffer_size_);
  }
  if (cqe.res == -ECANCELED || cqe.res == -ENOBUFS) {
    return;  // cancelled, or out of buffers for now: the bytes wait in the socket
  }
  if (cqe.res == 0 && (cqe.flags & IORING_CQE_F_MORE)) return;  // nothing, and more to come
  ready->push_back({reg->channel, ReadyEvent::kReceived, cqe.res, bytes});
  ++*count;
}

}  // namespace tern::net
