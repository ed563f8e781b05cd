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
// Channels whose owner takes received bytes (a TcpConnection) read with a
// multishot receive instead of a poll for input: the kernel reads into a
// buffer of the loop's ring of provided buffers as bytes arrive (into the
// free part of a large one where the kernel consumes buffers in parts, a
// small one each otherwise) and the loop hands them over
// (ReadyEvent::kReceived), so a request costs no read(2). Their poll
// request then covers output only. Such owners send through the ring as
// well (start_send: one send request, submitted with the round's batch),
// so a keep-alive request and its response cost no system call of their
// own. An owner may read for itself for a while (Channel::set_reads_itself:
// large pieces); its receive is cancelled, and input is polled for only
// after the receive's last completion, so its bytes come before any read.
//
// A completion finds its channel through a table indexed by fd (in pages
// made as descriptors reach them, 24 bytes an entry: with ten thousand
// idle connections it is a part of what each costs); its
// user_data carries a generation, so a completion for a registration
// cancelled or replaced since (or for an fd since closed and reused) is
// dropped. A receive's completions carry the registration's generation
// rather than the request's: bytes received before a pause in reading
// still reach the channel. Completions of poll requests for one channel
// within a round are merged into one ready event.
//
#pragma once

#include <liburing.h>

#include <memory>
#include <utility>
#include <vector>

#include "net/buffer.h"
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
  bool can_send(const Channel& channel) const override;
  void start_send(Channel& channel, const char* data, size_t length, bool more) override;
  void abandon_send(Channel& channel, Buffer&& bytes) override;
  IoBackend backend() const override { return IoBackend::kIoUring; }
  // Whether receives take their bytes from the free part of large buffers
  // (the kernel consumes them in parts; Linux 6.12, unless
  // TERN_IO_URING_BUFFERS=whole) rather than a small buffer each.
  bool consumes_buffers_in_parts() const { return incremental_; }
  bool drives_timers() const override { return true; }
  // 16 KiB from large buffers; from small ones, a receive that filled one.
  size_t large_receive() const override { return incremental_ ? 16 * 1024 : buffer_size_; }

 private:
  struct Registration {
    Channel* channel = nullptr;    // registered (kAdded), or detached with a receive winding down
    uint32_t generation = 0;       // of the channel's registration; 0 is never used
    uint32_t poll_generation = 0;  // of the poll request in flight
    // Where this round's ready event of the channel may be, to merge later
    // completions into it: it is, if the entry there is the channel's.
    uint32_t ready_index = 0;
    uint16_t poll_events = 0;  // what the poll request in flight polls for (poll bits, all below 1 << 16)
    uint8_t recv_sequence = 0;  // of the receive in flight
    bool send_armed : 1 = false;
    bool poll_armed : 1 = false;
    bool multishot : 1 = false;
    bool recv_armed : 1 = false;
    // A receive was cancelled and its last completion has not come: input
    // is polled for only after it (where the channel now reads for
    // itself), so that the bytes it received are handed over before any
    // read.
    bool recv_ending : 1 = false;
  };
  static_assert(sizeof(Registration) <= 24);
  static constexpr int kPageShift = 10;  // 1,024 registrations a page
  // The ring of provided buffers (io_uring_buffers.cc).
  static constexpr unsigned kBuffers = 1024;  // a power of two: the ring's entries
  static constexpr uint16_t kBufferGroup = 0;
  // The most one receive takes from a large buffer: a 64 KiB message is one
  // receive, one completion, and one send of its echo or relay (at 16 KiB,
  // four of each: 100 connections echoing 64 KiB messages, about a sixth
  // more messages per CPU-second). While a socket has bytes the kernel
  // repeats a multishot receive, up to 32 times a round: this bounds what a
  // connection that stops reading has been handed in that round, and then
  // holds, to 2 MiB, and the ring (kMaxBytes) what the loop's connections
  // are handed together in a round.
  static constexpr unsigned kMaxReceive = 64 * 1024;

  IoUringPoller() = default;
  bool setup_buffers();
  void grow_buffers(unsigned count);
  // The registration of fd, its page made if need be; find(): null where
  // no page holds fd yet.
  Registration& registration(int fd);
  Registration* find(int fd);
  uint32_t next_generation();
  // Brings the requests in flight for fd in line with what its channel wants.
  void sync(int fd, Registration& reg);
  void arm_poll(int fd, Registration& reg, uint32_t events, bool multishot);
  void arm_recv(int fd, Registration& reg);
  void cancel(uint64_t data);
  void unregister(int fd, Registration& reg);
  // Unregisters channel; whether a request of its was in flight.
  bool drop(Channel* channel);
  // Whether channel's input comes by receive requests rather than polls.
  bool receives_for(const Channel& channel, int fd) const;
  void rearm_completed();
  void return_lent_buffers();
  io_uring_sqe* next_sqe();
  void collect(std::vector<ReadyEvent>* ready, int* count);
  void collect_recv(const io_uring_cqe& cqe, std::vector<ReadyEvent>* ready, int* count);
  void offer(uint16_t buffer_id, int offset);
  // The bytes a receive's completion names (null where it has none); its
  // buffer is lent until next round once the kernel is done with it.
  const char* take_bytes(const io_uring_cqe& cqe);
  void collect_send(const io_uring_cqe& cqe, std::vector<ReadyEvent>* ready, int* count);

  io_uring ring_{};
  uint32_t next_generation_ = 1;
  std::vector<std::unique_ptr<Registration[]>> pages_;  // by fd >> kPageShift
  std::vector<int> completed_;  // fds with a request ended this round: re-armed next round
  // The ring of provided buffers for receives (absent on kernels before 5.19).
  io_uring_buf_ring* buffer_ring_ = nullptr;
  char* buffers_ = nullptr;
  std::vector<uint16_t> lent_;  // buffer ids handed out this round
  // Consumed in parts (incremental_): bytes handed out of each buffer so far.
  std::vector<uint32_t> consumed_;
  // Bytes of sends abandoned by their closed owner, by user_data, kept until
  // the kernel reports the send's end (usually its cancellation).
  std::vector<std::pair<uint64_t, Buffer>> orphans_;
  unsigned buffer_size_ = 0;
  unsigned max_buffers_ = 0;     // the most the ring grows to (memory reserved for them)
  unsigned buffers_in_use_ = 0;  // ids 0 .. buffers_in_use_ - 1 are the ring's or lent
  bool incremental_ = false;     // the kernel consumes a buffer in parts
  bool grew_this_round_ = false;
};

}  // namespace tern::net
