// ConnectionGate: who may hold one more connection to a TcpServer, by the
// client's address (a per-address connection limit: server/limits/).
// TcpServer::set_gate() puts one in front of the server's addresses.
//
// enter() is asked once a new connection's client is known: at accept, or
// on an address that takes the PROXY protocol once the header has named it;
// either way before any TLS handshake. A connection it refuses is closed at
// once (and counted as shed). One it lets in calls leave() with the same
// address when it closes, on the gate that let it in, even if the server
// has been given another meanwhile (each connection keeps its gate).
//
// Any I/O loop's thread, several at once: an implementation locks what it
// shares.
#pragma once

namespace tern::net {

class InetAddress;

class ConnectionGate {
 public:
  virtual ~ConnectionGate() = default;
  // A connection from `client` asks in: false closes it. Any loop's thread.
  virtual bool enter(const InetAddress& client) = 0;
  // A connection that entered has closed. Its loop's thread.
  virtual void leave(const InetAddress& client) = 0;
};

}  // namespace tern::net
