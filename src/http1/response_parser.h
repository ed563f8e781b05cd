// ResponseParser: the head of an HTTP/1.x response from an upstream server
// (status line and header section, RFC 9112), and how its body is framed.
//
// The reverse proxy's counterpart of RequestParser, and as strict, because
// an upstream that two parsers read differently can split one response
// into two for the client (response splitting). It is handed the bytes
// received so far and answers kComplete, kNeedMore or kError; after
// kNeedMore the caller appends what arrives and calls again with the longer
// span (same first byte). The search for the end of the head resumes where
// it stopped; the head is read once, whole, when its empty line is in.
// Every header view points into the span of the call that answered
// kComplete, valid while those bytes are.
//
// Errors (the response is answered 502, and the upstream connection is not
// reused):
//   - a status line that is not "HTTP/1.x" SP 3DIGIT [SP reason], or a
//     major version other than 1 (checked as soon as the first bytes come,
//     so that an upstream speaking something else fails at once);
//   - a line that ends in a bare LF or holds a bare CR or a NUL;
//   - a field name that is not a token, whitespace before the colon, a
//     control character in a value, obs-fold (a line starting with
//     whitespace);
//   - a head over Limits::max_head_bytes or with more than
//     Limits::max_headers fields;
//   - Content-Length malformed or repeated with different values;
//     Transfer-Encoding in an HTTP/1.0 response, together with
//     Content-Length, malformed, or ending in a coding other than chunked
//     (nothing but chunked is decoded, so such a body cannot be relayed).
//
// Framing (RFC 9112 6.3): no body for a response to HEAD and for 1xx, 204
// and 304; chunked; a Content-Length; else the body runs until the upstream
// closes, and the connection cannot be reused. A 1xx other than 101 is an
// interim response: the caller drops it and parses the final one after it.
//
// One parser per upstream exchange; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "http/request.h"
#include "http1/request_parser.h"

namespace tern::http {

struct ResponseHead {
  enum class Body : uint8_t {
    kNone,        // HEAD, 1xx, 204, 304
    kLength,      // content_length bytes
    kChunked,     // Transfer-Encoding: chunked
    kUntilClose,  // read until the upstream closes
  };

  Version version = Version::kHttp11;
  int status = 0;
  std::string_view reason;
  std::vector<Header> headers;
  Body body = Body::kNone;
  uint64_t content_length = 0;  // for kLength
  // The connection may carry another request once this body is read.
  bool keep_alive = false;
  // "Connection: upgrade" was among the options (a 101 switching protocols).
  bool upgrade = false;
  // Bytes of the status line and header section, final CRLF included.
  size_t head_size = 0;

  // The first field with this name (case-insensitive), or "".
  std::string_view header(std::string_view name) const;
  bool interim() const { return status >= 100 && status < 200 && status != 101; }
};

class ResponseParser {
 public:
  // What bounds a response head: its bytes, as nginx's proxy_buffer_size
  // does; the count of fields is only a backstop (an application that sends
  // a hundred cookies is within it).
  struct Limits {
    size_t max_head_bytes = 32 * 1024;
    size_t max_headers = Request::kDefaultMaxHeaders;
    bool operator==(const Limits&) const = default;
  };

  ResponseParser() = default;
  explicit ResponseParser(Limits limits) : limits_(limits) {}

  // Parses the response whose first byte is data[0]; `head_request`: the
  // request was HEAD (no body whatever the fields say). On kComplete *head
  // is filled and head->head_size bytes of `data` were its head; call
  // reset() before the next response (an interim one's successor included).
  ParseStatus parse(std::string_view data, bool head_request, ResponseHead* head);
  void reset() { scanned_ = 0; }

  // After kError, a short reason for the log.
  std::string_view error_reason() const { return error_; }

 private:
  ParseStatus fail(std::string_view reason);
  bool read_status_line(std::string_view line, ResponseHead* head);
  bool read_fields(std::string_view fields, ResponseHead* head);
  bool judge_framing(bool head_request, ResponseHead* head);

  Limits limits_;
  size_t scanned_ = 0;  // bytes known to hold no end of the head
  std::string_view error_;
};

}  // namespace tern::http
