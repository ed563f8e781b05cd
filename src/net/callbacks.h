// Callback types shared by TcpServer, TcpClient and TcpConnection.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "net/file_region.h"

namespace tern::net {

class Buffer;
class EventLoop;
class TcpConnection;

// Level-triggered: the kernel reports readiness for as long as it lasts.
// Edge-triggered: once per change; handlers read and write until EAGAIN, and a
// connection keeps EPOLLOUT registered instead of toggling it with epoll_ctl.
enum class TriggerMode : uint8_t { kLevel, kEdge };

// Names a connection across threads and across time. A connection object is
// recycled after close, with a new generation, so an old id finds nothing.
struct ConnectionId {
  EventLoop* loop = nullptr;    // the connection's loop
  uint32_t slot = UINT32_MAX;   // its slot in the loop's ConnectionTable
  uint32_t generation = 0;      // the slot's generation while it is this connection
  bool valid() const { return loop != nullptr; }  // names a connection (one that may have closed)
  friend bool operator==(const ConnectionId&, const ConnectionId&) = default;  // the same connection
};

// What a connection calls. One instance is shared by every connection of a
// server (connections hold a pointer, so accepting copies no std::function);
// the server keeps it alive longer than its connections.
struct ConnectionCallbacks {
  // Connection established and connection closed: check conn.connected().
  std::function<void(TcpConnection&)> on_connection;
  // Bytes arrived; consume what you can from the buffer, leave the rest.
  std::function<void(TcpConnection&, Buffer&)> on_message;
  // Every queued byte has been handed to the kernel.
  std::function<void(TcpConnection&)> on_write_complete;
  // Call on_write_complete only once after each TcpConnection::ask_write_complete()
  // rather than after every write (for protocols that rarely need it).
  bool write_complete_when_asked = false;
  // Queued output crossed high_water_mark going up (stop producing until
  // write-complete; see TcpConnection::stop_reading for the input side).
  std::function<void(TcpConnection&, size_t queued)> on_high_water_mark;
  size_t high_water_mark = 64 * 1024 * 1024;
  // Large file regions sent to a peer on this host leave from a mapping of
  // the file rather than by sendfile (TcpServerOptions::map_files_for_local_peers).
  bool map_files_for_local_peers = false;
  // A head queued just before a file region waits for the file's first
  // bytes (TcpServerOptions::tcp_nopush).
  bool tcp_nopush = true;
  // Internal: called after on_connection on close, for the owner's bookkeeping.
  std::function<void(TcpConnection&)> on_close;
};

}  // namespace tern::net
