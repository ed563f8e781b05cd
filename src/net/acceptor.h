// Acceptor: accepts connections on one listening socket.
//
// Runs on one loop. It accepts up to kAcceptBurst connections per readiness
// event (a level-triggered channel, so a busy backlog is not starved and does
// not starve the loop), and hands each to the new-connection callback.
//
// Running out of descriptors (EMFILE, ENFILE) would otherwise spin the loop:
// the pending connection keeps the socket readable while accept() keeps
// failing. First the release callback may give descriptors back (a cache of
// open files lets go of some); if it frees any, accepting goes on. Else
// the Acceptor uses the one spare descriptor it keeps open: on exhaustion it
// closes the spare, accepts the connection, closes it at once (the peer sees
// a reset rather than a hang) and reopens the spare. If even that fails, or
// the kernel is short of memory (ENOBUFS, ENOMEM), it stops accepting for
// 100 ms. Either way it logs at most once a second.
//
// Owned by TcpServer (one per listening socket). Loop thread only, except
// bind_listen().
#pragma once

#include <functional>

#include "base/result.h"
#include "net/channel.h"
#include "net/inet_address.h"
#include "net/socket.h"
#include "net/timer_wheel.h"

namespace tern::net {

class EventLoop;

class Acceptor {
 public:
  // Takes each accepted socket (non-blocking) and its peer's address.
  using NewConnectionCallback = std::function<void(Socket socket, const InetAddress& peer)>;
  static constexpr int kAcceptBurst = 64;  // accepts per readiness event at most

  // Any thread. A non-blocking socket bound to addr and listening. IPv6
  // sockets are IPv6-only, so [::]:80 and 0.0.0.0:80 can both be listened on.
  static Result<Socket> bind_listen(const InetAddress& addr, bool reuse_port, int backlog);

  // Accepts on `listening_socket` (see bind_listen) on `loop`, once listen() is called.
  Acceptor(EventLoop* loop, Socket listening_socket);

  ~Acceptor();
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  void set_new_connection_callback(NewConnectionCallback cb) { callback_ = std::move(cb); }  // before listening
  // Called on this loop when accept() finds the descriptors exhausted;
  // returns how many it closed.
  void set_release_callback(std::function<size_t()> cb) { release_ = std::move(cb); }
  // Starts accepting. Loop thread only.
  void listen();
  bool listening() const { return listening_; }  // listen() was called
  int fd() const { return socket_.fd(); }         // the listening socket's

  // Accept errors seen, for tests and statistics.
  uint64_t exhaustion_events() const { return exhaustion_events_; }

 private:
  void handle_read();
  // Returns false when accepting should stop for this event.
  bool handle_accept_error(int err);
  // Out of descriptors: the spare one is closed to accept a connection and
  // close it at once, then opened again. False without a spare.
  bool shed_one();
  // Stops reading the listening socket for 100 ms.
  void pause_accepting();

  EventLoop* const loop_;
  Socket socket_;
  Channel channel_;
  Socket spare_fd_;
  NewConnectionCallback callback_;
  std::function<size_t()> release_;
  TimerId resume_timer_;
  bool listening_ = false;
  uint64_t exhaustion_events_ = 0;
};

}  // namespace tern::net
