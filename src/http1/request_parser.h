// RequestParser: an incremental parser for HTTP/1.0 and HTTP/1.1 request
// heads (request line and header section, RFC 9112), as a resumable state
// machine.
//
// No I/O, and no allocation once its field table has grown to the largest
// head it has seen (it keeps that capacity): it is handed the bytes received so far for the
// current request and answers kComplete, kNeedMore or kError. After kNeedMore
// the caller appends what arrives and calls again with the longer span (same
// first byte); the parser resumes where it stopped instead of starting over,
// keeping only offsets, so the caller's buffer may move between calls.
//
// It is strict where leniency lets two parsers disagree about where a message
// ends (request smuggling), and answers with the status the caller should
// send, always followed by closing the connection:
//   400  malformed request line or field; whitespace between a field name and
//        its colon; NUL, CR or LF where they may not be; obs-fold; missing or
//        repeated Host in HTTP/1.1; Content-Length that is malformed, repeated
//        with different values, or sent together with Transfer-Encoding;
//        Transfer-Encoding in HTTP/1.0; Transfer-Encoding whose last coding is
//        not "chunked"
//   414  request-target longer than Limits::max_target
//   431  header section longer than Limits::max_head_bytes, or more than
//        Limits::max_headers fields
//   501  a transfer coding other than chunked (RFC 9112 6.1)
//   505  an HTTP version whose major number is not 1 (HTTP/1.2 and later
//        minor versions are answered as 1.1, RFC 9110 2.5)
// Method tokens are not judged here: an unknown one parses as Method::kOther
// and the server answers 501 (or 405 for a known method a resource refuses).
//
// Leading empty lines before a request line are skipped (RFC 9112 2.2).
//
// One parser per connection. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "http/request.h"

namespace tern::http {

enum class ParseStatus : uint8_t { kComplete, kNeedMore, kError };

class RequestParser {
 public:
  struct Limits {
    size_t max_target = 8192;
    size_t max_head_bytes = 16384;  // request line plus all fields
    size_t max_headers = Request::kDefaultMaxHeaders;
  };

  RequestParser() = default;
  explicit RequestParser(Limits limits) : limits_(limits) {}
  // Its field table points into its own storage.
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  // Parses the request whose first byte is data[0]. On kComplete the request
  // is filled and request->head_size() bytes of `data` are its head (any
  // bytes after belong to the body or to the next request); call reset()
  // before parsing the next request. On kError see error_status().
  ParseStatus parse(std::string_view data, Request* request);

  // Forget all progress; the next parse() starts a new request.
  void reset();
  // New limits for the next request (call with reset()).
  void set_limits(Limits limits) { limits_ = limits; }

  // After kError: the status to answer (400, 414, 431, 501, 505) and a short
  // reason for the log.
  int error_status() const { return error_status_; }
  std::string_view error_reason() const { return error_reason_; }

  const Limits& limits() const { return limits_; }

 private:
  // Implementation state (offsets into the data, current state) is private
  // and documented in request_parser.cc.
  Limits limits_;
  int error_status_ = 0;
  std::string_view error_reason_;
  // --- resumable state; see request_parser.cc ---
  enum class Step : uint8_t;

  Step scan(const char* p, size_t end);
  Step skip_empty_lines(const char* p, size_t end);
  Step scan_method(const char* p, size_t end);
  Step scan_target(const char* p, size_t end);
  Step scan_version(const char* p, size_t end);
  Step scan_fields(const char* p, size_t end);
  Step line_start_stop(const char* p, size_t i, size_t end);
  Step line_stop(const char* p, size_t i, size_t end);
  Step stop(size_t pos, uint8_t state, Step step);
  bool add_field(const char* p, size_t cr);
  Step failed(int status, std::string_view reason);
  ParseStatus finish(std::string_view data, Request* request);
  void fill(std::string_view data, Request* request) const;
  size_t head_limit() const;

  // Offsets are from data[0]; uint32_t keeps the span table small, and
  // head_limit() keeps every offset below 2^32.
  struct Span {
    uint32_t name_start, name_len, value_start, value_len;
  };

  uint8_t state_ = 0;
  Version version_ = Version::kHttp11;
  size_t pos_ = 0;            // next byte to examine
  size_t request_start_ = 0;  // first byte of the method (after empty lines)
  size_t method_end_ = 0;
  size_t target_start_ = 0;
  size_t target_end_ = 0;
  size_t line_start_ = 0;  // first byte of the field line being scanned
  size_t header_count_ = 0;
  // The field table: grown by doubling, kept across reset(); spans_ and
  // span_capacity_ mirror its storage so that adding a field costs a
  // compare and a store, as with a fixed array.
  std::vector<Span> span_storage_;
  Span* spans_ = nullptr;
  size_t span_capacity_ = 0;
  void grow_spans();
};

}  // namespace tern::http
