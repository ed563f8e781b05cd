// ResponseWriter: a handler's side of one HTTP response, written straight
// into a ResponseStream (response_stream.h: HTTP/1.x on a connection's
// output queue, or memory in tests); nothing is built in between.
//
//   w.start(200).header("Content-Type", "text/plain").body("hello\n");
//   w.start(200).header("Content-Type", type).file(region);  // sendfile
//   w.start(304).header("ETag", etag).end();
//   w.start(200).header("Content-Type", type).begin_stream();
//   w.write("part"); ...; w.end_stream();  // chunked in 1.1, close-delimited in 1.0
//   w.start(200).begin_stream(length);   // a stream whose length is known
//   w.write(...); ...; w.end_stream();
//
// start() writes the status line and the headers every response gets (Date,
// Server); the finishing call (body, file, end, begin_stream) adds the
// filters' fields (Vary, Content-Encoding, a location's fields) and ends the
// head with the framing it implies, which the stream spells out (for
// HTTP/1: Content-Length or Transfer-Encoding, and Connection); for HEAD
// requests and bodiless statuses it never sends a body. Http1Connection
// flushes once per batch of pipelined requests.
//
// One per request, created by Http1Connection. Loop thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/compression.h"
#include "http/request.h"
#include "http/response_stream.h"
#include "net/callbacks.h"

namespace tern::net {
class Buffer;
}  // namespace tern::net

namespace tern::http {

class ErrorPageHook;
class ExchangeTransport;

// Fields a configuration adds to responses (a location's headers),
// prepared once: `always` on every response,
// `success` on 200, 201, 204, 206, 301, 302, 303, 304, 307 and 308 (the
// statuses nginx's add_header applies to); and the fields it takes out of
// every response, whoever wrote them (an application's X-Powered-By, the
// Server field).
struct ExtraFields {
  FieldBlock always;                // on every response
  FieldBlock success;               // on the statuses above
  std::vector<std::string> remove;  // lower case
  bool empty() const { return always.empty() && success.empty() && remove.empty(); }  // nothing to do
  bool removes(std::string_view name) const;  // whether `name` (any case) is taken out
};

class ResponseWriter {
 public:
  // What the writer needs to know about the request and the connection.
  struct Context {
    ResponseStream* stream = nullptr;  // HTTP/1 on the connection, or memory in tests
    bool head_only = false;   // a HEAD request
    bool keep_alive = true;   // the request allows it and the server wants it
    std::string_view date;    // "Sun, 06 Nov 1994 08:49:37 GMT", cached per loop
    std::string_view server;  // Server header value; empty for none
    // Http1Output::append_start(200, {}, server, date), cached per loop,
    // or empty: an HTTP/1 start(200) then copies it in one piece.
    std::string_view ok_head;
    // An exchange's transport, asked as the head is written whether the
    // connection must close after it (Exchange::begin sets it); null for
    // a response written at once.
    const ExchangeTransport* transport = nullptr;
  };

  explicit ResponseWriter(const Context& context) : ctx_(context) {}  // a response for `context`'s request
  ResponseWriter(const ResponseWriter&) = delete;
  ResponseWriter& operator=(const ResponseWriter&) = delete;

  // Begins the response: its status (the reason phrase is the standard
  // one when empty), then the fields every response gets (Server, Date).
  ResponseWriter& start(int status, std::string_view reason = {});
  // One field, after start(); a number is written in decimal.
  ResponseWriter& header(std::string_view name, std::string_view value);
  ResponseWriter& header(std::string_view name, uint64_t value);
  // Fields prepared once, as a cache keeps them (the static handler's
  // per-file fields): for HTTP/1 one copy instead of a call per field.
  ResponseWriter& fields(const FieldBlock& block);

  // Finishing calls; exactly one per response.
  void body(std::string_view data);
  // A body that stays valid while `owner` is held (a cached file's bytes):
  // a stream that queues it (HTTP/2) keeps a reference, not a copy.
  void body(std::string_view data, const BodyOwner& owner);
  // The body from a file region, sent with its Content-Length.
  void file(net::FileRegion region);
  // No body: the response ends with its head.
  void end();
  // A stream of unknown length: write() its pieces, then end_stream().
  void begin_stream();
  // A stream of exactly `content_length` bytes (sent with Content-Length);
  // write() drops what goes beyond it.
  void begin_stream(uint64_t content_length);
  void write(std::string_view data);  // after begin_stream
  void end_stream();  // the stream is complete, and with it the response
  // A stream of known length ended before all of it was written: the
  // response is truncated, and only closing the connection says so.
  bool stream_short() const { return length_left_ > 0; }

  // Fields added to the head when it ends (not owned; must outlive the
  // response head). Before the finishing call.
  void set_extra_fields(const ExtraFields* extra) { extra_ = extra; }
  // Pages of its own for error statuses (not owned; see error_page.h).
  void set_error_pages(ErrorPageHook* hook) { error_pages_ = hook; }
  ErrorPageHook* error_pages() const { return error_pages_; }

  // Compression as an output filter: `policy` (not owned; null for none)
  // and the request's Accept-Encoding value. Before start().
  void set_compression(const CompressionPolicy* policy, std::string_view accept_encoding) {
    compression_ = policy;
    accept_encoding_ = accept_encoding;
  }
  // Asked by a handler before it writes its fields: whether the body of a
  // 200 with this Content-Type (and length, when known) is compressed, and
  // how. A coding other than identity arms the filter: the finishing call
  // adds Content-Encoding, compresses what it is given (a file region is
  // read into memory; a stream is compressed piece by piece, chunked), and
  // the handler should send a weak ETag. A compressible type makes the
  // response say "Vary: Accept-Encoding" whatever the answer.
  Coding compress_for(std::string_view content_type, std::optional<uint64_t> length);
  // The body, already in the coding compress_for() chose (a cached copy,
  // valid while `owner` is held when one is given).
  void coded_body(std::string_view coded, const BodyOwner& owner = {}) {
    body_coded_ = true;
    body(coded, owner);
  }
  // compress_for() armed the filter (for a 200).
  bool compressing_body() const { return coding_ != Coding::kIdentity; }
  // The policy set_compression() gave; null: none.
  const CompressionPolicy* compression() const { return compression_; }
  // "Vary: Accept-Encoding" will be added (the handler need not).
  bool varies() const { return vary_; }

  // Close the connection after this response (must be called before the
  // finishing call to be announced in the Connection header).
  void close_after() { ctx_.keep_alive = false; }
  // Whether the connection goes on after this response (settled once the
  // head is written).
  bool keep_alive() const { return ctx_.keep_alive; }

  bool started() const { return status_ != 0; }  // start() was called
  bool finished() const { return finished_; }    // the response is whole
  int status() const { return status_; }         // the status started with; 0 before
  uint64_t body_bytes() const { return body_bytes_; }  // for the access log
  // The client went away before the response was whole (its transport
  // says so before the exchange is logged).
  void client_closed() { client_closed_ = true; }
  // The status the access log and the metrics see: status(), or 499 where
  // the client went away before one was started (nginx's "client closed
  // request").
  int logged_status() const { return status_ != 0 ? status_ : client_closed_ ? 499 : 0; }

 private:
  void end_head(ResponseFraming::Kind kind, uint64_t content_length);

  bool compressing() const { return coding_ != Coding::kIdentity && status_ == 200; }
  void body_coded(std::string_view data);

  Context ctx_;
  const ExtraFields* extra_ = nullptr;
  const CompressionPolicy* compression_ = nullptr;
  std::string_view accept_encoding_;
  Coding coding_ = Coding::kIdentity;
  bool vary_ = false;
  bool body_coded_ = false;  // body() is given what body_coded() compressed
  std::unique_ptr<Compressor> compressor_;  // a compressed stream
  ErrorPageHook* error_pages_ = nullptr;
  int status_ = 0;
  bool client_closed_ = false;
  bool finished_ = false;
  bool streaming_ = false;
  bool sized_ = false;          // begin_stream(length)
  bool discard_body_ = false;   // HEAD, or a status without a body
  uint64_t length_left_ = 0;    // of a sized stream
  uint64_t body_bytes_ = 0;
};

}  // namespace tern::http
