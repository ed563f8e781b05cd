// floor_uring_echo: the io_uring floor of the library comparison
// (README.md), the least work an echo server can do on this kernel through
// io_uring, with no library: one ring per thread, a multishot accept, one
// multishot receive per connection into a ring of provided buffers, and
// each buffer sent back as it came, by a send request straight from it. A
// buffer goes back to the ring when its send has completed.
//
//   floor_uring_echo --port 0 --threads 2
//
// A connection has one send in flight; what it receives meanwhile waits
// behind it, in order. Buffers are 16 KiB, so a 64 KiB message is four
// receives and four sends: for large messages the epoll floor (floor_echo)
// does less, and the comparison takes the better of the two floors per row.
// It has no timers: the timer row has no floor.
//
// --threads T > 1: one ring per thread, each with its own listener on the
// same port (SO_REUSEPORT), as the other servers do. A ring is made on the
// thread that submits to it (IORING_SETUP_SINGLE_ISSUER).
#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <latch>
#include <memory>
#include <thread>
#include <vector>

#include "echo_common.h"

namespace {

// A power of two (the ring's mask); enough for 1,000 connections each
// with a 64 KiB message in flight.
constexpr unsigned kBuffers = 4096;
constexpr unsigned kBufferSize = 16 * 1024;
constexpr unsigned kEntries = 4096;

// What a completion is for, in the low bits of its user data; the rest is
// the connection's descriptor.
enum Kind : uint64_t { kAccept = 0, kReceive = 1, kSend = 2 };
constexpr unsigned kKindBits = 2;

struct Piece {
  uint16_t buffer;
  uint32_t offset;
  uint32_t length;
};

struct Connection {
  std::deque<Piece> queue;  // received, not yet sent back; the front is in flight
  bool ended = false;       // its receive is over: closed once its last send is
};

class Worker {
 public:
  // False (errno-style code in *error) when the ring or its buffers cannot
  // be set up.
  bool start(int listener, int* error) {
    listener_ = listener;
    io_uring_params params{};
    params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE;
    params.cq_entries = 4 * kEntries;
    int ret = io_uring_queue_init_params(kEntries, &ring_, &params);
    if (ret == -EINVAL) {  // before Linux 6.1
      params = io_uring_params{};
      params.flags = IORING_SETUP_CQSIZE;
      params.cq_entries = 4 * kEntries;
      ret = io_uring_queue_init_params(kEntries, &ring_, &params);
    }
    if (ret < 0) return *error = -ret, false;
    buffers_.reset(static_cast<char*>(std::aligned_alloc(4096, size_t{kBuffers} * kBufferSize)));
    ring_buffers_.reset(static_cast<io_uring_buf_ring*>(std::aligned_alloc(4096, kBuffers * sizeof(io_uring_buf))));
    io_uring_buf_ring_init(ring_buffers_.get());
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<uint64_t>(ring_buffers_.get());
    reg.ring_entries = kBuffers;
    reg.bgid = 0;
    ret = io_uring_register_buf_ring(&ring_, &reg, 0);
    if (ret < 0) return *error = -ret, false;
    for (unsigned i = 0; i < kBuffers; ++i) {
      io_uring_buf_ring_add(ring_buffers_.get(), buffer(i), kBufferSize, static_cast<uint16_t>(i),
                            io_uring_buf_ring_mask(kBuffers), static_cast<int>(i));
    }
    io_uring_buf_ring_advance(ring_buffers_.get(), kBuffers);
    arm_accept();
    return true;
  }

  void run() {
    for (;;) {
      const int ret = io_uring_submit_and_wait(&ring_, 1);
      if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
        std::fprintf(stderr, "floor_uring_echo: io_uring_enter: %s\n", std::strerror(-ret));
        std::exit(1);
      }
      io_uring_cqe* cqe = nullptr;
      unsigned head = 0;
      unsigned seen = 0;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;
        const uint64_t data = io_uring_cqe_get_data64(cqe);
        const int fd = static_cast<int>(data >> kKindBits);
        switch (data & ((1u << kKindBits) - 1)) {
          case kAccept: accepted(*cqe); break;
          case kReceive: received(fd, *cqe); break;
          case kSend: sent(fd, cqe->res); break;
        }
      }
      io_uring_cq_advance(&ring_, seen);
      // Receives that found the ring empty wait for a buffer to come back
      // (re-armed at once, they would fail again and again).
      if (returned_ && !starved_.empty()) {
        for (int fd : starved_) arm_receive(fd);
        starved_.clear();
      }
      returned_ = false;
    }
  }

 private:
  char* buffer(unsigned id) const { return buffers_.get() + size_t{id} * kBufferSize; }

  io_uring_sqe* next_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {  // the submission queue is full: hand it over first
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
  }

  void arm_accept() {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_multishot_accept(sqe, listener_, nullptr, nullptr, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, kAccept);
  }

  void arm_receive(int fd) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_recv_multishot(sqe, fd, nullptr, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = 0;
    io_uring_sqe_set_data64(sqe, (static_cast<uint64_t>(fd) << kKindBits) | kReceive);
  }

  void send_front(int fd) {
    const Piece& piece = connections_[static_cast<size_t>(fd)]->queue.front();
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_send(sqe, fd, buffer(piece.buffer) + piece.offset, piece.length - piece.offset, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, (static_cast<uint64_t>(fd) << kKindBits) | kSend);
  }

  void give_back(uint16_t id) {
    io_uring_buf_ring_add(ring_buffers_.get(), buffer(id), kBufferSize, id, io_uring_buf_ring_mask(kBuffers), 0);
    io_uring_buf_ring_advance(ring_buffers_.get(), 1);
    returned_ = true;
  }

  void accepted(const io_uring_cqe& cqe) {
    if (cqe.res >= 0) {
      const int fd = cqe.res;
      const int on = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      if (connections_.size() <= static_cast<size_t>(fd)) connections_.resize(static_cast<size_t>(fd) + 1);
      connections_[static_cast<size_t>(fd)] = std::make_unique<Connection>();
      arm_receive(fd);
    }
    if (!(cqe.flags & IORING_CQE_F_MORE)) arm_accept();
  }

  void received(int fd, const io_uring_cqe& cqe) {
    Connection& conn = *connections_[static_cast<size_t>(fd)];
    const bool more = (cqe.flags & IORING_CQE_F_MORE) != 0;
    if (cqe.res > 0) {
      const auto id = static_cast<uint16_t>(cqe.flags >> IORING_CQE_BUFFER_SHIFT);
      conn.queue.push_back({id, 0, static_cast<uint32_t>(cqe.res)});
      if (conn.queue.size() == 1) send_front(fd);
      if (!more) arm_receive(fd);  // the kernel ended it (a full CQ ring)
      return;
    }
    if (more) return;
    // Out of buffers: they come back as sends complete. Else the end of
    // the stream or an error.
    if (cqe.res == -ENOBUFS) return starved_.push_back(fd);
    conn.ended = true;
    if (conn.queue.empty()) close_connection(fd);
  }

  void sent(int fd, int res) {
    Connection& conn = *connections_[static_cast<size_t>(fd)];
    Piece& piece = conn.queue.front();
    if (res > 0 && piece.offset + static_cast<uint32_t>(res) < piece.length) {
      piece.offset += static_cast<uint32_t>(res);  // the socket took part of it
      return send_front(fd);
    }
    if (res <= 0) {
      // The peer is gone: what is queued is dropped, and the receive, if
      // it has not ended, is ended (its last completion closes the
      // connection).
      for (const Piece& left : conn.queue) give_back(left.buffer);
      conn.queue.clear();
      if (conn.ended) return close_connection(fd);
      ::shutdown(fd, SHUT_RDWR);
      return;
    }
    give_back(piece.buffer);
    conn.queue.pop_front();
    if (!conn.queue.empty()) return send_front(fd);
    if (conn.ended) close_connection(fd);
  }

  void close_connection(int fd) {
    connections_[static_cast<size_t>(fd)].reset();
    ::close(fd);
  }

  io_uring ring_{};
  int listener_ = -1;
  struct Free {  // for std::aligned_alloc
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> buffers_;
  std::unique_ptr<io_uring_buf_ring, Free> ring_buffers_;
  std::vector<std::unique_ptr<Connection>> connections_;  // by descriptor
  std::vector<int> starved_;  // connections whose receive found no buffer
  bool returned_ = false;     // a buffer went back to the ring this round
};

}  // namespace

int main(int argc, char** argv) {
  echo_bench::Flags flags;
  if (!echo_bench::parse_flags(argc, argv, &flags)) return 2;
  if (flags.timers > 0) {
    std::fprintf(stderr, "floor_uring_echo: no timers (the floor is an echo only)\n");
    return 2;
  }
  int port = flags.port;
  const std::vector<int> listeners = echo_bench::listen_all(flags.threads, &port, "floor_uring_echo");
  if (listeners.empty()) return 1;
  // Each ring is made on its own thread; the port is announced once all are.
  std::vector<Worker> workers(listeners.size());
  std::vector<int> errors(listeners.size(), 0);
  std::latch started(static_cast<std::ptrdiff_t>(listeners.size()));
  auto serve = [&](size_t i) {
    const bool ok = workers[i].start(listeners[i], &errors[i]);
    started.count_down();
    if (ok) workers[i].run();
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < listeners.size(); ++i) threads.emplace_back(serve, i);
  const bool ok = workers[0].start(listeners[0], &errors[0]);
  started.count_down();
  started.wait();
  for (int error : errors) {
    if (error != 0) {
      std::fprintf(stderr, "floor_uring_echo: io_uring unavailable: %s\n", std::strerror(error));
      std::_Exit(3);
    }
  }
  echo_bench::announce(port);
  if (ok) workers[0].run();
}
