// IoUringPoller: Poller on io_uring poll requests.
//
// Each registered channel has one poll request in the kernel: multishot for
// edge-triggered channels (it reports each readiness change, as EPOLLET
// does), one-shot for level-triggered ones, re-armed after the round that
// handled it (a poll armed on a ready file completes at once, which is
// level-triggered behaviour). Registrations, changes and cancellations are
// queued as submission entries and go to the kernel together with the wait,
// in one io_uring_enter per round; the wait's timeout drives the loop's timer
// wheel, so no timerfd is read.
//
// A completion finds its channel through a table indexed by fd; its
// user_data carries the registration's generation, so a completion for a
// registration cancelled or replaced since (or for an fd since closed and
// reused) is dropped. Completions for one channel within a round are merged
// into one ready event.
//
// Owned by one EventLoop; loop thread only. The ring is set up with
// SINGLE_ISSUER and DEFER_TASKRUN where the kernel has them (6.1+): the
// kernel then does a loop's completion work only when the loop asks for it.
#pragma once

#include <liburing.h>

#include <memory>
#include <vector>

#include "net/poller.h"

namespace tern::net {

class IoUringPoller final : public Poller {
 public:
  // nullptr (and *err set) when the kernel refuses a ring.
  static std::unique_ptr<IoUringPoller> create(int* err);
  ~IoUringPoller() override;

  int poll(int timeout_ms, std::vector<ReadyEvent>* ready) override;
  void update_channel(Channel* channel) override;
  void remove_channel(Channel* channel) override;
  void forget_channel(Channel* channel) override;
  IoBackend backend() const override { return IoBackend::kIoUring; }
  bool drives_timers() const override { return true; }

 private:
  struct Registration {
    Channel* channel = nullptr;  // set while the channel is registered (kAdded)
    uint32_t generation = 0;     // of the request in flight; 0 is never used
    uint32_t armed_events = 0;   // what that request polls for
    uint32_t round = 0;          // the round its ready event was queued in
    uint32_t ready_index = 0;    // and where, to merge later completions
    bool armed = false;          // a request is in flight
    bool multishot = false;
  };

  IoUringPoller() = default;
  Registration& registration(int fd);
  void arm(int fd, Registration& reg, Channel* channel);
  void cancel(Registration& reg, int fd);
  void rearm_completed();
  io_uring_sqe* next_sqe();
  void collect(std::vector<ReadyEvent>* ready, int* count);

  io_uring ring_{};
  uint32_t next_generation_ = 1;
  uint32_t round_ = 0;
  std::vector<Registration> registrations_;  // by fd
  std::vector<int> completed_;  // fds whose request ended this round: re-arm
};

}  // namespace tern::net
