// UdpSocket: owns one non-blocking UDP socket. Movable; one thread at a time.
#pragma once

#include <string_view>

#include "base/result.h"
#include "net/inet_address.h"
#include "net/socket.h"

namespace tern::net {

class UdpSocket {
 public:
  // A socket bound to addr (port 0: the kernel picks one).
  static Result<UdpSocket> bind(const InetAddress& addr, bool reuse_port = false);
  // An unbound socket of addr's family (the kernel binds it on first send).
  static Result<UdpSocket> open(sa_family_t family);

  int fd() const { return socket_.fd(); }  // the socket
  InetAddress local_address() const;       // where it is bound (the port the kernel gave for 0)

  // One datagram. EAGAIN means the send buffer is full: the datagram is lost.
  Result<size_t> send_to(std::string_view data, const InetAddress& peer);
  // One datagram into buf; *peer gets the sender. Error EAGAIN when none waits.
  Result<size_t> receive_from(char* buf, size_t len, InetAddress* peer);

 private:
  explicit UdpSocket(Socket socket) : socket_(std::move(socket)) {}
  Socket socket_;
};

}  // namespace tern::net
