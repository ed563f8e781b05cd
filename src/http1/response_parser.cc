#include "http1/response_parser.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "http/chars.h"
#include "http/field_values.h"

namespace tern::http {
namespace {

constexpr std::string_view kVersionPrefix = "HTTP/1.";

}  // namespace

std::string_view ResponseHead::header(std::string_view name) const {
  for (const Header& h : headers) {
    if (iequals(h.name, name)) return h.value;
  }
  return {};
}

ParseStatus ResponseParser::fail(std::string_view reason) {
  error_ = reason;
  return ParseStatus::kError;
}

// The end of the head is the first CRLF CRLF. Line ends are found with
// memchr, and each LF must follow a CR where it is found, so an upstream
// that ends lines with a bare LF fails at once rather than at the size
// limit; bare CRs and NULs are caught when the lines are read.
ParseStatus ResponseParser::parse(std::string_view data, bool head_request, ResponseHead* head) {
  const size_t prefix = std::min(data.size(), kVersionPrefix.size());
  if (data.substr(0, prefix) != kVersionPrefix.substr(0, prefix)) {
    return fail("not an HTTP/1.x status line");
  }
  // Only the first max_head_bytes are looked at, so the answer is the same
  // however the bytes were cut.
  const size_t limit = std::min(data.size(), limits_.max_head_bytes);
  size_t head_size = 0;
  for (size_t i = scanned_; head_size == 0;) {
    const void* lf = i < limit ? std::memchr(data.data() + i, '\n', limit - i) : nullptr;
    if (lf == nullptr) {
      scanned_ = limit;
      if (data.size() > limit) return fail("response head too large");
      return ParseStatus::kNeedMore;
    }
    const size_t at = static_cast<size_t>(static_cast<const char*>(lf) - data.data());
    if (at == 0 || data[at - 1] != '\r') return fail("bare LF in the response head");
    if (at >= 3 && data[at - 2] == '\n') head_size = at + 1;  // data[at - 3] is CR, checked before
    i = at + 1;
  }

  // Every line ends with CRLF; the last one is the empty line.
  const std::string_view text = data.substr(0, head_size - 2);
  const size_t status_end = text.find("\r\n");
  head->headers.clear();
  // One allocation for the fields of a usual response, not one per doubling.
  if (head->headers.capacity() == 0) head->headers.reserve(16);
  if (!read_status_line(text.substr(0, status_end), head)) return ParseStatus::kError;
  if (!read_fields(text.substr(status_end + 2), head)) return ParseStatus::kError;
  if (!judge_framing(head_request, head)) return ParseStatus::kError;
  head->head_size = head_size;
  return ParseStatus::kComplete;
}

// status-line = HTTP-version SP status-code SP [ reason-phrase ]; the SP
// before an empty reason is often left out, and is not required here.
bool ResponseParser::read_status_line(std::string_view line, ResponseHead* head) {
  if (line.size() < 12 || !chars::is_digit(line[7]) || line[8] != ' ') {
    fail("malformed status line");
    return false;
  }
  head->version = line[7] == '0' ? Version::kHttp10 : Version::kHttp11;
  int status = 0;
  for (size_t i = 9; i < 12; ++i) {
    if (!chars::is_digit(line[i])) {
      fail("malformed status code");
      return false;
    }
    status = status * 10 + (line[i] - '0');
  }
  if (status < 100) {
    fail("malformed status code");
    return false;
  }
  std::string_view reason = line.substr(12);
  if (!reason.empty()) {
    if (reason.front() != ' ' || !chars::all_field_text(reason)) {
      fail("malformed reason phrase");
      return false;
    }
    reason.remove_prefix(1);
  }
  head->status = status;
  head->reason = reason;
  return true;
}

bool ResponseParser::read_fields(std::string_view fields, ResponseHead* head) {
  while (!fields.empty()) {
    const size_t end = fields.find("\r\n");
    const std::string_view line = fields.substr(0, end);
    fields.remove_prefix(end + 2);
    if (chars::is_ows(line.front())) {
      fail("obs-fold in the response head");
      return false;
    }
    size_t colon = 0;
    while (colon < line.size() && chars::is_tchar(line[colon])) ++colon;
    if (colon == 0 || colon == line.size() || line[colon] != ':') {
      fail("malformed field name in the response head");
      return false;
    }
    const std::string_view value = chars::trim_ows(line.substr(colon + 1));
    if (!chars::all_field_text(value)) {
      fail("invalid character in a response field");
      return false;
    }
    if (head->headers.size() == limits_.max_headers) {
      fail("too many fields in the response head");
      return false;
    }
    const std::string_view name = line.substr(0, colon);
    head->headers.push_back(Header{name, value, field_id(name)});
  }
  return true;
}

// RFC 9112 6.3, read strictly: whatever could make two parsers disagree on
// where the body ends is an error, never a guess.
bool ResponseParser::judge_framing(bool head_request, ResponseHead* head) {
  std::optional<uint64_t> length;
  fields::TransferCodings codings;
  fields::ConnectionOptions options;
  for (const Header& h : head->headers) {
    if (iequals(h.name, "content-length")) {
      if (!fields::note_content_length(h.value, &length)) {
        fail("invalid or conflicting Content-Length from the upstream");
        return false;
      }
    } else if (iequals(h.name, "transfer-encoding")) {
      codings.note(h.value);
    } else if (iequals(h.name, "connection")) {
      options.note(h.value);
    }
  }
  if (codings.seen) {
    if (head->version == Version::kHttp10) {
      fail("Transfer-Encoding in an HTTP/1.0 response");
      return false;
    }
    if (length) {
      fail("both Transfer-Encoding and Content-Length from the upstream");
      return false;
    }
    if (codings.malformed || !codings.last_chunked || codings.chunked > 1 || codings.others > 0) {
      fail("a transfer coding other than chunked from the upstream");
      return false;
    }
    head->body = ResponseHead::Body::kChunked;
  } else if (length) {
    head->body = ResponseHead::Body::kLength;
    head->content_length = *length;
  } else {
    head->body = ResponseHead::Body::kUntilClose;
  }
  const int status = head->status;
  if (head_request || status < 200 || status == 204 || status == 304) {
    head->body = ResponseHead::Body::kNone;
  }
  head->upgrade = options.upgrade;
  head->keep_alive = !options.close &&
                     (head->version == Version::kHttp11 || options.keep_alive) &&
                     head->body != ResponseHead::Body::kUntilClose;
  return true;
}

}  // namespace tern::http
