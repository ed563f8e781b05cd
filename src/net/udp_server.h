// UdpServer: a UDP socket on one loop, with batched I/O.
//
// Each readiness event takes up to `batch` datagrams with one recvmmsg(2) and
// calls the datagram callback for each. Replies sent with send_to() from that
// callback are collected and leave with one sendmmsg(2) when the batch has
// been handled; outside a callback, send_to() sends at once. A datagram larger
// than max_datagram is truncated by the kernel; it is counted and dropped,
// never delivered cut short.
//
// For several loops, create one UdpServer per loop with reuse_port and the
// kernel spreads datagrams by source address.
//
// Owned by the user. Loop thread only.
#pragma once

#include <sys/socket.h>

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "net/channel.h"
#include "net/inet_address.h"
#include "net/udp_socket.h"

namespace tern::net {

class EventLoop;

// How a UdpServer reads.
struct UdpServerOptions {
  size_t batch = 32;            // datagrams taken per recvmmsg at most
  size_t max_datagram = 65536;  // the largest delivered; a larger one is dropped
  bool reuse_port = false;      // SO_REUSEPORT, for one server per loop on one port
};

class UdpServer {
 public:
  // Takes each datagram (valid during the call) and its sender.
  using DatagramCallback =
      std::function<void(UdpServer& server, std::string_view data, const InetAddress& peer)>;

  // A server on `address` and `loop`; binds at start().
  UdpServer(EventLoop* loop, const InetAddress& address, UdpServerOptions options = {});

  ~UdpServer();
  UdpServer(const UdpServer&) = delete;
  UdpServer& operator=(const UdpServer&) = delete;

  void set_datagram_callback(DatagramCallback cb) { callback_ = std::move(cb); }  // before start()
  // Binds and starts receiving.
  Result<void> start();

  // One datagram to `peer`: collected during a callback's batch, else sent
  // at once. After a successful start() only (before it, an abort).
  void send_to(const InetAddress& peer, std::string_view data);
  // Sends what send_to() has collected.
  void flush();

  const InetAddress& local_address() const { return local_address_; }  // bound (the port the kernel gave for 0)
  uint64_t received() const { return received_; }  // datagrams delivered
  uint64_t sent() const { return sent_; }          // datagrams sent
  uint64_t dropped() const { return dropped_; }  // truncated in or failed out

 private:
  struct Batch;  // recvmmsg/sendmmsg vectors and their storage
  void handle_read();

  EventLoop* const loop_;
  InetAddress local_address_;
  const UdpServerOptions options_;
  std::unique_ptr<UdpSocket> socket_;
  std::unique_ptr<Channel> channel_;
  std::unique_ptr<Batch> in_;
  std::unique_ptr<Batch> out_;
  size_t out_count_ = 0;
  bool in_callback_ = false;
  DatagramCallback callback_;
  uint64_t received_ = 0;
  uint64_t sent_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace tern::net
