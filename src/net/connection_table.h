// ConnectionTable: the connections of one EventLoop, in recycled slots.
//
// Owns every TcpConnection of its loop. A slot's object is reused after the
// connection closes (with a new generation, so stale ConnectionIds miss), and
// a closed connection goes back to the pool only at the end of the dispatch
// round in which it closed. Up to kMaxPooled idle objects are kept; beyond
// that, closed connections are freed, so a burst does not pin memory forever.
//
// Nor does what the burst's connections allocated. glibc keeps freed
// memory in its heaps for the next allocations and gives back by itself
// only the free top of the main heap: after thousands of connections (or
// an HTTP/2 client's thousands of streams) the peak would stay resident
// for good. So once the loop's connections have fallen to half their peak
// or fewer, and stay there a moment, the loop's buffer pool, its idle
// connection objects and the caches that listen for it (add_burst_listener:
// an HTTP server's spare connections and request states) let go of most of
// what they hold, and the heaps are trimmed (malloc_trim: free pages
// anywhere in them go back). A loop whose load holds steady is never
// trimmed.
//
// Owned by EventLoop. Loop thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "net/callbacks.h"
#include "net/inet_address.h"
#include "net/socket.h"

namespace tern::net {

class EventLoop;
class TcpConnection;

class ConnectionTable {
 public:
  static constexpr size_t kMaxPooled = 1024;  // closed objects kept for reuse at most

  explicit ConnectionTable(EventLoop* loop);  // the table of `loop` (which makes it)
  ~ConnectionTable();
  ConnectionTable(const ConnectionTable&) = delete;
  ConnectionTable& operator=(const ConnectionTable&) = delete;

  // Wraps a connected socket. Call establish() on the result to start I/O.
  // `callbacks`, which its owner (a TcpServer, a TcpClient) keeps, also
  // tags the connection as that owner's, for close_all.
  // Accepted connections count in the loop's load (LoopLoad::connections);
  // outgoing ones (to an upstream) do not.
  TcpConnection* open(Socket socket, const InetAddress& peer,
                      const ConnectionCallbacks* callbacks, TriggerMode trigger, bool accepted = true);
  // Registers the connection with the poller and runs on_connection. With
  // input_waiting (a deferred accept) it reads first and registers only a
  // connection that is still open after that read.
  void establish(TcpConnection* conn, bool input_waiting = false);

  // nullptr if the connection has closed (or the id is from another loop).
  TcpConnection* find(ConnectionId id);

  // Closes every live connection opened with `callbacks` now, running their
  // close callbacks before returning (owners call this as they are destroyed).
  void close_all(const ConnectionCallbacks* callbacks);

  size_t live() const { return live_; }  // connections open now

  // fn runs each time a burst of this loop's connections is over (see
  // above), before the heaps are trimmed: a per-loop cache lets go of what
  // the burst left in it. `key` names it for remove_burst_listener(), which
  // its owner calls before it goes (on the loop thread, or once the loop
  // has stopped).
  void add_burst_listener(const void* key, std::function<void()> fn);
  void remove_burst_listener(const void* key);

  // TcpConnection's side: a closed connection, to recycle after the round.
  void release(TcpConnection* conn);
  // EventLoop's side: end of round.
  void reap();

 private:
  // Fewer connections at their peak are no burst worth a trim.
  static constexpr size_t kBurst = 32;
  static constexpr std::chrono::milliseconds kQuiet{500};  // how long the fall must last
  // What the loop's buffer pool, and its pool of idle connection objects,
  // keep of what a burst left in them.
  static constexpr size_t kKeptBufferBytes = 256 * 1024;
  static constexpr size_t kKeptIdle = 64;

  void release_burst();

  EventLoop* const loop_;
  std::vector<std::unique_ptr<TcpConnection>> slots_;
  std::vector<uint32_t> free_;     // slots whose object is idle (or null)
  std::vector<uint32_t> closing_;  // closed this round
  size_t live_ = 0;
  size_t peak_ = 0;  // most connections at once since the last trim
  bool release_scheduled_ = false;
  std::vector<std::pair<const void*, std::function<void()>>> burst_listeners_;
};

}  // namespace tern::net
