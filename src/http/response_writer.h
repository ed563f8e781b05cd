// ResponseWriter: serialises one HTTP response straight into a connection's
// output queue; nothing is built in between.
//
//   w.start(200).header("Content-Type", "text/plain").body("hello\n");
//   w.start(200).header("Content-Type", type).file(region);  // sendfile
//   w.start(304).header("ETag", etag).end();
//   w.start(200).header("Content-Type", type).begin_stream();
//   w.write("part"); ...; w.end_stream();  // chunked in 1.1, close-delimited in 1.0
//
// start() writes the status line and the headers every response gets (Date,
// Server); the finishing call (body, file, end, begin_stream) adds the
// framing (Content-Length or Transfer-Encoding) and Connection, and for HEAD
// requests and bodiless statuses never sends a body. Bytes are appended to
// the TcpConnection's output; HttpConnection flushes once per batch of
// pipelined requests.
//
// One per request, created by HttpConnection. Loop thread only.
#pragma once

#include <cstdint>
#include <string_view>

#include "http/request.h"
#include "net/callbacks.h"

namespace tern::net {
class Buffer;
class TcpConnection;
}  // namespace tern::net

namespace tern::http {

class ResponseWriter {
 public:
  // What the writer needs to know about the request and the connection.
  struct Context {
    net::TcpConnection* conn = nullptr;
    Version version = Version::kHttp11;
    bool head_only = false;   // a HEAD request
    bool keep_alive = true;   // the request allows it and the server wants it
    std::string_view date;    // "Sun, 06 Nov 1994 08:49:37 GMT", cached per loop
    std::string_view server;  // Server header value; empty for none
  };

  explicit ResponseWriter(const Context& context) : ctx_(context) {}
  ResponseWriter(const ResponseWriter&) = delete;
  ResponseWriter& operator=(const ResponseWriter&) = delete;

  ResponseWriter& start(int status, std::string_view reason = {});
  ResponseWriter& header(std::string_view name, std::string_view value);
  ResponseWriter& header(std::string_view name, uint64_t value);

  // Finishing calls; exactly one per response.
  void body(std::string_view data);
  void file(net::FileRegion region);
  void end();
  void begin_stream();
  void write(std::string_view data);  // after begin_stream
  void end_stream();

  // Close the connection after this response (must be called before the
  // finishing call to be announced in the Connection header).
  void close_after() { ctx_.keep_alive = false; }
  bool keep_alive() const { return ctx_.keep_alive; }

  bool started() const { return status_ != 0; }
  bool finished() const { return finished_; }
  int status() const { return status_; }
  uint64_t body_bytes() const { return body_bytes_; }  // for the access log

 private:
  net::Buffer& out();
  void end_head(uint64_t content_length, bool has_length);

  Context ctx_;
  int status_ = 0;
  bool finished_ = false;
  bool streaming_ = false;
  bool chunked_ = false;
  uint64_t body_bytes_ = 0;
};

}  // namespace tern::http
