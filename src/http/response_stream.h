// ResponseStream: where one response goes, as a handler's ResponseWriter
// sees it: a head, then body bytes and file regions, then the end. What
// the wire looks like is the stream's business: Http1Output (HTTP/1.x on
// a connection's byte stream: Content-Length or chunked, Connection) is
// the one tern has; an HTTP/2 stream turns the same calls into HEADERS
// and DATA frames.
//
// The head is a status and fields, given one call at a time: Http1Output
// writes each as text straight into the connection's output (no field
// table), an HTTP/2 stream keeps them for HPACK. end_head() closes it with
// the framing the writer chose; body bytes and file regions follow in
// order, and end() closes the body.
//
// One response at a time; loop thread of the stream's owner.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "http/field_block.h"
#include "net/callbacks.h"

namespace tern::http {

// What every response head starts with: the Server and Date fields (each
// left out when empty), and HTTP/1's text of a 200's status line and those
// two, cached per loop (a stream that writes text may copy it whole).
struct HeadStart {
  std::string_view server;         // the Server field's value
  std::string_view date;           // the Date field's value
  std::string_view http1_ok_head;  // "HTTP/1.1 200 OK\r\nServer: ...\r\nDate: ...\r\n"
};

// What keeps a body's bytes valid (a cached file), referred to for the
// length of one call rather than shared: only a stream that queues the
// bytes past the call (HTTP/2's) takes a reference, so HTTP/1, which copies
// them at once, pays no reference count for it.
class BodyOwner {
 public:
  BodyOwner() = default;  // no owner: the bytes outlive the response
  // Refers to `owner`, which must outlive the call the BodyOwner is given to.
  template <class T>
  BodyOwner(const std::shared_ptr<T>& owner)  // NOLINT(google-explicit-constructor): given as the pointer is
      : owner_(owner ? &owner : nullptr), share_(&share_as<T>) {}

  explicit operator bool() const { return owner_ != nullptr; }  // whether there is an owner
  // A reference of one's own, to keep past the call.
  std::shared_ptr<const void> share() const { return owner_ == nullptr ? nullptr : share_(owner_); }

 private:
  template <class T>
  static std::shared_ptr<const void> share_as(const void* owner) {
    return *static_cast<const std::shared_ptr<T>*>(owner);
  }

  const void* owner_ = nullptr;
  std::shared_ptr<const void> (*share_)(const void*) = nullptr;
};

// How a response's body is delimited, as the writer knows it when the
// head ends.
struct ResponseFraming {
  // How the body ends.
  enum class Kind : uint8_t {
    kNone,    // no body by its status (1xx, 204, 304)
    kLength,  // exactly `length` bytes (a HEAD response sends none of them)
    kStream,  // a body of unknown length, ended by end()
  };
  Kind kind = Kind::kLength;  // how the body ends
  uint64_t length = 0;        // kLength: the body's bytes
  bool head_only = false;  // a HEAD request: the framing is announced, no body is sent
  bool keep_alive = true;  // the connection goes on after this response
};

class ResponseStream {
 public:
  // The head: start_head() once, then its fields in order, then end_head().
  // `reason` empty: the status's usual phrase.
  virtual void start_head(int status, std::string_view reason, const HeadStart& start) = 0;
  virtual void field(std::string_view name, std::string_view value) = 0;
  virtual void fields(const FieldBlock& block) = 0;
  // The head is complete. Returns whether the connection can still go on
  // after this response (HTTP/1.0 has no way to end a stream but closing).
  virtual bool end_head(const ResponseFraming& framing) = 0;
  // Body bytes, after end_head() (never for HEAD or a bodiless status).
  virtual void data(std::string_view bytes) = 0;
  // The same for bytes that stay valid while `owner` is held (a cached
  // file's): a stream that queues the body may keep them, not a copy.
  virtual void kept_data(std::string_view bytes, const BodyOwner& owner) = 0;
  // A file region of the body; `region.keep_alive` holds the open file.
  virtual void file(net::FileRegion region) = 0;
  // The body is complete (every response ends with it).
  virtual void end() = 0;

 protected:
  ~ResponseStream() = default;
};

}  // namespace tern::http
