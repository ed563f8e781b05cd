// SocketAddress: where an outgoing stream connection goes: an IPv4/IPv6
// address and port, or a Unix-domain socket path (a FastCGI backend on the
// same machine, say). Value type; any thread.
//
// Listening sockets and accepted peers stay InetAddress: a TcpConnection
// keeps two of those, and this type is seven times their size.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <string>
#include <string_view>

#include "base/result.h"
#include "net/inet_address.h"

namespace tern::net {

class SocketAddress {
 public:
  // An IP address and port.
  SocketAddress(const InetAddress& inet);  // NOLINT(google-explicit-constructor): any IP address is one

  // A Unix-domain socket at `path` (at most 107 bytes).
  static Result<SocketAddress> unix_path(std::string_view path);
  // "unix:/run/php/php-fpm.sock", "127.0.0.1:9000", "[::1]:9000".
  static Result<SocketAddress> parse(std::string_view text);

  sa_family_t family() const { return storage_.ss_family; }  // AF_INET, AF_INET6 or AF_UNIX
  bool is_unix() const { return family() == AF_UNIX; }      // a Unix-domain socket's path
  // The IP address; valid only when !is_unix().
  InetAddress inet() const;

  // The sockaddr and its length, for connect().
  const sockaddr* sockaddr_ptr() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t socklen() const { return length_; }

  // As parse() reads it: "unix:/path" or "127.0.0.1:9000".
  std::string to_string() const;

  friend bool operator==(const SocketAddress& a, const SocketAddress& b);  // the same address

 private:
  SocketAddress() = default;

  sockaddr_storage storage_{};
  socklen_t length_ = 0;
};

}  // namespace tern::net
