// OutputStream: a connection's outgoing bytes, as the protocol layers see
// them: bytes appended in place to the end of the output (no copy in
// between), file regions queued after them (sent with sendfile where the
// transport can), everything leaving in order. HTTP/1 responses are
// written to one (http1/http1_output.h), so a handler never needs a socket:
// TcpConnection is the stream of a plain connection, tests keep the bytes
// in memory (tests/support/memory_output.h), and a TLS connection is one
// more implementation.
//
// Loop thread of the stream's owner.
#pragma once

#include "net/buffer.h"
#include "net/callbacks.h"

namespace tern::net {

class OutputStream {
 public:
  // The end of the output queue, to append to (after any queued file).
  virtual Buffer& output_tail_buffer() = 0;
  // Queues `region` after what is queued; `region.keep_alive` holds what it
  // needs (the open file) until it is sent.
  virtual void send_file(FileRegion region) = 0;

 protected:
  ~OutputStream() = default;
};

}  // namespace tern::net
