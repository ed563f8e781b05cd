// ResponseStream: where one response goes, as a handler's ResponseWriter
// sees it: a head, then body bytes and file regions, then the end. What
// the wire looks like is the stream's business: Http1Output (HTTP/1.x on
// a connection's byte stream: Content-Length or chunked, Connection) is
// the one tern has; an HTTP/2 stream turns the same calls into HEADERS
// and DATA frames.
//
// The head is built in the stream's head buffer in HTTP/1 text form, the
// status line and then one "Name: value\r\n" per field, because that is
// what the common case sends as is (one copy, no field table); another
// protocol reads the fields back from it. end_head() closes it with the
// framing the writer chose; body bytes and file regions follow in order,
// and end() closes the body.
//
// One response at a time; loop thread of the stream's owner.
#pragma once

#include <cstdint>
#include <string_view>

#include "net/callbacks.h"

namespace tern::net {
class Buffer;
}

namespace tern::http {

// How a response's body is delimited, as the writer knows it when the
// head ends.
struct ResponseFraming {
  enum class Kind : uint8_t {
    kNone,    // no body by its status (1xx, 204, 304)
    kLength,  // exactly `length` bytes (a HEAD response sends none of them)
    kStream,  // a body of unknown length, ended by end()
  };
  Kind kind = Kind::kLength;
  uint64_t length = 0;
  bool head_only = false;  // a HEAD request: the framing is announced, no body is sent
  bool keep_alive = true;  // the connection goes on after this response
};

class ResponseStream {
 public:
  // Where the head is built (status line, then fields), until end_head().
  virtual net::Buffer& head_buffer() = 0;
  // The head is complete. Returns whether the connection can still go on
  // after this response (HTTP/1.0 has no way to end a stream but closing).
  virtual bool end_head(const ResponseFraming& framing) = 0;
  // Body bytes, after end_head() (never for HEAD or a bodiless status).
  virtual void data(std::string_view bytes) = 0;
  // A file region of the body; `region.keep_alive` holds the open file.
  virtual void file(net::FileRegion region) = 0;
  // The body is complete (every response ends with it).
  virtual void end() = 0;

 protected:
  ~ResponseStream() = default;
};

}  // namespace tern::http
