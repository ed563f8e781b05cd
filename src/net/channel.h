// Channel: the interest in one file descriptor's events, and what to call
// when they happen.
//
// A Channel does not own its fd; the object that owns the fd (a Socket inside
// a TcpConnection, the Acceptor, the EventLoop's wake-up eventfd) owns the
// Channel too and must remove() it before closing the fd. Events use the
// poll/epoll bit values (EPOLLIN == POLLIN and so on), which io_uring's poll
// requests use too.
//
// Loop thread only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>

namespace tern::net {

class EventLoop;

// What a channel calls, for owners there are many of (a TcpConnection per
// connection): one static table per kind of owner plus the owner's pointer,
// rather than four std::function slots in every Channel. Plain function
// pointers, not virtual functions: UBSan's vptr check needs a spare file
// descriptor, and a server out of descriptors (EMFILE) is exactly when
// these run.
//
// `received` is optional: an owner that has it (a TcpConnection) may be
// given the bytes themselves rather than told to read, where the poller
// can receive for it (io_uring); n is the byte count, 0 at the peer's end
// of stream, or -errno. They are delivered whatever the interest now: the
// bytes have left the socket (a pause in reading lets at most a round's
// worth arrive after it); an owner that is closing drops them.
struct ChannelHandler {
  void (*readable)(void* owner);  // the fd can be read
  void (*writable)(void* owner);  // the fd can be written
  void (*hangup)(void* owner);    // both sides are closed (EPOLLHUP)
  void (*error)(void* owner);     // the socket has an error (EPOLLERR)
  void (*received)(void* owner, const char* data, ssize_t n) = nullptr;  // see above
  // Optional too: the end of a send the owner gave the poller (bytes sent,
  // or -errno).
  void (*sent)(void* owner, ssize_t n) = nullptr;
};

class Channel {
 public:
  using Callback = std::function<void()>;  // what the set_*_callback handlers are

  // Watches `fd` (not owned) on `loop`; nothing until an enable_*() call.
  Channel(EventLoop* loop, int fd);
  // Aborts if the channel is still registered: remove() or forget() first.
  ~Channel();

  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Rebinds a channel that is not registered to another fd (pooled connections).
  void reset(int fd);

  // Either a handler or callbacks (the callbacks are kept out of line, for
  // the few channels of a loop that use them: eventfd, timerfd, acceptor).
  void set_handler(const ChannelHandler* handler, void* owner) {
    handler_ = handler;
    owner_ = owner;
  }
  void set_read_callback(Callback cb) { callbacks().read = std::move(cb); }
  void set_write_callback(Callback cb) { callbacks().write = std::move(cb); }
  void set_close_callback(Callback cb) { callbacks().close = std::move(cb); }
  void set_error_callback(Callback cb) { callbacks().error = std::move(cb); }

  // Edge-triggered channels report each readiness change once; the handler
  // must then read or write until EAGAIN. Set before the first enable_*().
  void set_edge_triggered(bool on);
  bool edge_triggered() const { return edge_triggered_; }

  // Interest in readiness, given to the poller at once.
  void enable_reading() { update(events_ | kReadEvents); }
  void disable_reading() { update(events_ & ~kReadEvents); }
  void enable_writing() { update(events_ | kWriteEvents); }
  void disable_writing() { update(events_ & ~kWriteEvents); }
  void enable_all() { update(events_ | kReadEvents | kWriteEvents); }
  void disable_all() { update(0); }
  // What it is interested in now.
  bool is_reading() const { return (events_ & kReadEvents) != 0; }
  bool is_writing() const { return (events_ & kWriteEvents) != 0; }
  bool is_none_event() const { return events_ == 0; }

  // Unregisters from the poller. Call before the fd is closed.
  void remove();
  // Like remove(), for an owner that closes the fd right away: closing the
  // only descriptor of a socket removes it from epoll, so the system call
  // is skipped (io_uring cancels its request, with no system call of its
  // own). Only for fds that were never duplicated.
  void forget();
  // Ignores this channel's events from now on without telling the poller:
  // for an owner that will forget() and close the fd at the end of the
  // round anyway (saves an EPOLL_CTL_DEL).
  void mute() { events_ = 0; }

  // Called by EventLoop with what the poller reported.
  void handle_event(uint32_t revents);
  void handle_received(const char* data, ssize_t n) { handler_->received(owner_, data, n); }
  void handle_sent(ssize_t n) { handler_->sent(owner_, n); }
  // Whether the owner takes received bytes (ChannelHandler::received) now.
  bool takes_received() const { return handler_ != nullptr && handler_->received != nullptr && !reads_itself_; }
  // An owner that takes received bytes may read them itself for a while
  // instead, on readiness (`readable`), as owners without `received` do:
  // a TcpConnection whose bytes come in large pieces reads them straight
  // into its own buffer rather than have them copied out of the poller's.
  // A poller that was receiving for the channel hands over what it had
  // received before the channel is told it is readable. Cleared by reset().
  void set_reads_itself(bool on);
  bool reads_itself() const { return reads_itself_; }
  // Whether the event being handled reported the peer's end of stream
  // (EPOLLRDHUP or EPOLLHUP): an edge-triggered reader whose read came
  // short has not read everything then, the end is still to be read (no
  // later edge reports it).
  bool peer_end_reported() const { return peer_end_reported_; }
  // Whether the owner takes the ends of its sends (ChannelHandler::sent).
  bool takes_sent() const { return handler_ != nullptr && handler_->sent != nullptr; }

  int fd() const { return fd_; }                   // the fd watched
  EventLoop* owner_loop() const { return loop_; }  // the loop it belongs to
  // Interest set for the poller, including EPOLLET when edge-triggered.
  uint32_t poller_events() const;
  uint32_t events() const { return events_; }  // the same without EPOLLET

  // Poller bookkeeping: whether and how this channel is registered.
  enum class PollerState : uint8_t { kNew, kAdded, kDetached };
  PollerState poller_state() const { return poller_state_; }    // the poller's
  void set_poller_state(PollerState s) { poller_state_ = s; }  // the poller's
  // Whether the poller sends for this channel (Poller::can_send), kept on
  // the channel so that asking costs no lookup; the poller's to set.
  bool sends_by_poller() const { return sends_by_poller_; }
  void set_sends_by_poller(bool on) { sends_by_poller_ = on; }

  static constexpr uint32_t kReadEvents = 0x001 | 0x002 | 0x2000;  // IN | PRI | RDHUP
  static constexpr uint32_t kWriteEvents = 0x004;                  // OUT

 private:
  struct Callbacks {
    Callback read;
    Callback write;
    Callback close;
    Callback error;
  };

  void update(uint32_t events);
  Callbacks& callbacks();

  // Ordered to leave no holes: 48 bytes, in one cache line where it is
  // embedded (TcpConnection).
  EventLoop* const loop_;
  int fd_;
  uint32_t events_ = 0;
  uint32_t epoch_ = 0;  // bumped by reset(): events for the old fd are dropped
  PollerState poller_state_ = PollerState::kNew;
  bool edge_triggered_ : 1 = false;
  bool sends_by_poller_ : 1 = false;
  bool reads_itself_ : 1 = false;
  bool peer_end_reported_ : 1 = false;
  const ChannelHandler* handler_ = nullptr;
  void* owner_ = nullptr;
  std::unique_ptr<Callbacks> callbacks_;
};

}  // namespace tern::net
