// InheritedSockets: listening sockets a process was handed when it was
// started, in the protocol of systemd's socket activation: descriptors
// 3 .. 3+$LISTEN_FDS-1, meant for the process $LISTEN_PID names. systemd
// hands them over (a .socket unit), and so does a server upgrading itself
// to a new binary: the new process listens on the very sockets the old one
// accepted on, so no connection is refused while both run.
//
// A TcpServer given the set (TcpServerOptions::inherited) takes the
// sockets bound to its addresses instead of binding new ones.
#pragma once

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "net/inet_address.h"
#include "net/socket.h"

namespace tern::net {

class InheritedSockets {
 public:
  InheritedSockets() = default;
  // The listening TCP sockets of $LISTEN_FDS when $LISTEN_PID is this
  // process (the variables are removed, so that no child takes them too;
  // the descriptors are marked close-on-exec). Other descriptors in the
  // range (a datagram socket, a file) are closed and counted in ignored().
  static InheritedSockets from_environment();

  // A listening socket bound to `address`, out of the set; nullopt when
  // none (is left).
  std::optional<Socket> take(const InetAddress& address);

  // Closes the sockets nobody took, and returns their addresses.
  std::vector<InetAddress> close_rest();

  size_t size() const { return sockets_.size(); }  // sockets not taken yet
  size_t ignored() const { return ignored_; }      // descriptors passed that were not listening TCP sockets

 private:
  std::vector<std::pair<InetAddress, Socket>> sockets_;
  size_t ignored_ = 0;
};

}  // namespace tern::net
