// ConnectionTable: the connections of one EventLoop, in recycled slots.
//
// Owns every TcpConnection of its loop. A slot's object is reused after the
// connection closes (with a new generation, so stale ConnectionIds miss), and
// a closed connection goes back to the pool only at the end of the dispatch
// round in which it closed. Up to kMaxPooled idle objects are kept; beyond
// that, closed connections are freed, so a burst does not pin memory forever.
//
// Owned by EventLoop. Loop thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "net/callbacks.h"
#include "net/inet_address.h"
#include "net/socket.h"

namespace tern::net {

class EventLoop;
class TcpConnection;

class ConnectionTable {
 public:
  static constexpr size_t kMaxPooled = 1024;

  explicit ConnectionTable(EventLoop* loop);
  ~ConnectionTable();
  ConnectionTable(const ConnectionTable&) = delete;
  ConnectionTable& operator=(const ConnectionTable&) = delete;

  // Wraps a connected socket. Call establish() on the result to start I/O.
  // `owner` tags the connection for close_all (a TcpServer, a TcpClient).
  // Accepted connections count in the loop's load (LoopLoad::connections);
  // outgoing ones (to an upstream) do not.
  TcpConnection* open(Socket socket, const InetAddress& peer,
                      const ConnectionCallbacks* callbacks, const void* owner,
                      TriggerMode trigger, bool accepted = true);
  // Registers the connection with the poller and runs on_connection. With
  // input_waiting (a deferred accept) it reads first and registers only a
  // connection that is still open after that read.
  void establish(TcpConnection* conn, bool input_waiting = false);

  // nullptr if the connection has closed (or the id is from another loop).
  TcpConnection* find(ConnectionId id);

  // Closes every live connection tagged with `owner` now, running their close
  // callbacks before returning (owners call this as they are destroyed).
  void close_all(const void* owner);

  size_t live() const { return live_; }

  // TcpConnection's side: a closed connection, to recycle after the round.
  void release(TcpConnection* conn);
  // EventLoop's side: end of round.
  void reap();

 private:
  EventLoop* const loop_;
  std::vector<std::unique_ptr<TcpConnection>> slots_;
  std::vector<uint32_t> free_;     // slots whose object is idle (or null)
  std::vector<uint32_t> closing_;  // closed this round
  size_t live_ = 0;
};

}  // namespace tern::net
