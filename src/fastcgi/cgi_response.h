// CgiHeadParser: the CGI response head that a FastCGI application (php-fpm)
// writes at the start of its STDOUT stream (RFC 3875 section 6):
//
//   Status: 404 Not Found\r\n
//   Content-Type: text/html\r\n
//   \r\n
//   <body...>
//
// STDOUT arrives in pieces that need not align with lines (see
// RecordParser), so the head is copied, line by line as it arrives, into
// storage the parser owns; feed() reports how many bytes of each piece
// belonged to the head, and the rest of the piece is body. Header views stay
// valid until reset() or destruction. The storage is bounded by the
// limits and keeps its capacity across reset(), so a parser reused for
// request after request stops allocating.
//
// Lines end with "\r\n" or "\n"; the head ends with an empty line. Each line
// is checked when it is complete: errors are a line without a colon, leading
// whitespace (obs-fold), a field name that is not a token, a CTL other than
// HTAB in a value, an invalid Status or Content-Length (or conflicting
// ones), more than the limit's fields (Status included), and a head over
// its bytes.
//
// The response status is that of the Status field; without one, 302 when
// there is a Location field (RFC 3875 6.2.3; a local redirect, 6.2.2, is
// answered the same way rather than followed inside the server), else 200.
//
// Owned by one FastCGI exchange; loop thread only. Not copyable or movable,
// since the header views point into the parser's own storage.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "http/request.h"
#include "http1/response_parser.h"

namespace tern::fastcgi {

class CgiHeadParser {
 public:
  enum Status : uint8_t { kNeedMore, kComplete, kError };

  // The bounds of an upstream's response head (bytes, fields), shared with
  // the reverse proxy's. Field positions are kept as 32-bit offsets, so
  // the bytes are capped at 4 GiB.
  explicit CgiHeadParser(http::ResponseParser::Limits limits = {})
      : max_head_(std::min<size_t>(limits.max_head_bytes, UINT32_MAX)), max_fields_(limits.max_headers) {}
  CgiHeadParser(const CgiHeadParser&) = delete;
  CgiHeadParser& operator=(const CgiHeadParser&) = delete;

  // Consumes the head's part of `data`. kNeedMore: all of data was head
  // (*used == data.size()); call again with the next piece. kComplete: the
  // head ended *used bytes in, and what follows is body. kError: see
  // error(); *used is 0. Once complete or failed, feed() returns the same
  // status with *used 0 until reset().
  Status feed(std::string_view data, size_t* used);

  // After kComplete.
  int status() const { return status_; }
  // The reason phrase of the Status field; may be empty.
  std::string_view reason() const { return reason_; }
  // Every field but Status, in order, names and values trimmed of SP/HTAB.
  std::span<const http::Header> headers() const { return headers_; }
  // The first field with this name (case-insensitive), or "" if absent.
  std::string_view header(std::string_view name) const;
  std::optional<uint64_t> content_length() const { return content_length_; }

  std::string_view error() const { return error_; }
  void reset();

 private:
  // Where one field's name and value lie in head_, while head_ may still
  // grow (and move); turned into views once the head is complete.
  struct FieldSpan {
    uint32_t name = 0;
    uint32_t name_len = 0;
    uint32_t value = 0;
    uint32_t value_len = 0;
  };

  Status end_of_line();
  Status add_field(std::string_view line, size_t line_start);
  Status note_status(std::string_view value, size_t value_start);
  Status note_content_length(std::string_view value);
  void complete();
  Status fail(std::string_view reason);

  const size_t max_head_;
  const size_t max_fields_;
  Status state_ = kNeedMore;
  std::string head_;        // the head so far; capacity kept across reset()
  size_t line_start_ = 0;   // offset in head_ of the line being collected
  size_t field_lines_ = 0;  // field lines seen, Status included
  int status_ = 0;
  bool has_status_ = false;
  bool has_location_ = false;
  uint32_t reason_start_ = 0;
  uint32_t reason_len_ = 0;
  std::string_view reason_;
  std::optional<uint64_t> content_length_;
  std::string_view error_;
  // Grown as fields come, capacity kept across reset().
  std::vector<FieldSpan> spans_;
  std::vector<http::Header> headers_;
};

}  // namespace tern::fastcgi
