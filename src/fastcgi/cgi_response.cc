#include "fastcgi/cgi_response.h"

#include <cstring>

#include "http/chars.h"

namespace tern::fastcgi {
namespace {

constexpr auto npos = std::string_view::npos;

using http::chars::is_digit;
using http::chars::is_ows;
using http::chars::is_tchar;

// CTLs other than HTAB, and DEL; bytes from 0x80 up (obs-text) are allowed.
bool is_ctl(char c) { return !http::chars::is_field_text(c); }

size_t leading_ows(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && is_ows(s[n])) ++n;
  return n;
}

std::string_view trim_right(std::string_view s) {
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

void CgiHeadParser::reset() {
  state_ = kNeedMore;
  head_.clear();
  line_start_ = field_lines_ = 0;
  status_ = 0;
  has_status_ = has_location_ = false;
  reason_start_ = reason_len_ = 0;
  reason_ = {};
  content_length_.reset();
  error_ = {};
  spans_.clear();
  headers_.clear();
}

CgiHeadParser::Status CgiHeadParser::fail(std::string_view reason) {
  state_ = kError;
  error_ = reason;
  return kError;
}

// Copies the data line by line (not byte by byte, and not more than belongs
// to the head), checking each line as its end arrives.
CgiHeadParser::Status CgiHeadParser::feed(std::string_view data, size_t* used) {
  *used = 0;
  if (state_ != kNeedMore) return state_;
  size_t i = 0;
  while (i < data.size()) {
    auto* nl = static_cast<const char*>(std::memchr(data.data() + i, '\n', data.size() - i));
    size_t end = nl == nullptr ? data.size() : static_cast<size_t>(nl - data.data()) + 1;
    if (end - i > max_head_ - head_.size()) return fail("CGI response head too large");
    head_.append(data.data() + i, end - i);
    i = end;
    if (nl == nullptr) break;
    Status s = end_of_line();
    if (s == kComplete) *used = i;
    if (s != kNeedMore) return s;
  }
  *used = i;
  return kNeedMore;
}

// head_ ends with '\n'; the line runs from line_start_.
CgiHeadParser::Status CgiHeadParser::end_of_line() {
  size_t start = line_start_;
  std::string_view line(head_.data() + start, head_.size() - 1 - start);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  line_start_ = head_.size();
  if (!line.empty()) return add_field(line, start);
  complete();
  return kComplete;
}

// field-name ":" field-value. Whitespace before the colon is dropped, as RFC
// 9112 5.1 tells a proxy to do with responses; whitespace at the start of a
// line (obs-fold) makes the name invalid, so no continuation line can turn
// into a field of its own.
CgiHeadParser::Status CgiHeadParser::add_field(std::string_view line, size_t line_start) {
  if (++field_lines_ > max_fields_) return fail("too many fields in CGI response head");
  size_t colon = line.find(':');
  if (colon == npos) return fail("CGI response line without a colon");
  std::string_view name = trim_right(line.substr(0, colon));
  if (name.empty()) return fail("empty field name in CGI response");
  for (char c : name) {
    if (!is_tchar(c)) return fail("invalid field name in CGI response");
  }
  std::string_view rest = line.substr(colon + 1);
  for (char c : rest) {
    if (is_ctl(c)) return fail("control character in CGI response field");
  }
  size_t lead = leading_ows(rest);
  std::string_view value = trim_right(rest.substr(lead));
  size_t value_start = line_start + colon + 1 + lead;

  if (http::iequals(name, "Status")) return note_status(value, value_start);
  if (http::iequals(name, "Content-Length")) {
    if (Status s = note_content_length(value); s != kNeedMore) return s;
  } else if (http::iequals(name, "Location") && !value.empty()) {
    has_location_ = true;
  }
  spans_.push_back({
      .name = static_cast<uint32_t>(line_start),
      .name_len = static_cast<uint32_t>(name.size()),
      .value = static_cast<uint32_t>(value_start),
      .value_len = static_cast<uint32_t>(value.size()),
  });
  return kNeedMore;
}

// "Status: 404 Not Found": three digits (100 to 999), then nothing or a
// space and a reason phrase.
CgiHeadParser::Status CgiHeadParser::note_status(std::string_view value, size_t value_start) {
  if (has_status_) return fail("more than one Status field in CGI response");
  if (value.size() < 3 || value[0] < '1' || value[0] > '9' || !is_digit(value[1]) ||
      !is_digit(value[2]) || (value.size() > 3 && !is_ows(value[3]))) {
    return fail("invalid Status field in CGI response");
  }
  has_status_ = true;
  status_ = (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0');
  size_t lead = 3 + leading_ows(value.substr(3));
  reason_start_ = static_cast<uint32_t>(value_start + lead);
  reason_len_ = static_cast<uint32_t>(value.size() - lead);
  return kNeedMore;
}

// 1*DIGIT without overflow; a repeated field must agree.
CgiHeadParser::Status CgiHeadParser::note_content_length(std::string_view value) {
  uint64_t n = 0;
  bool ok = !value.empty();
  for (char c : value) {
    ok = ok && is_digit(c) && !__builtin_mul_overflow(n, 10u, &n) &&
         !__builtin_add_overflow(n, static_cast<unsigned>(c - '0'), &n);
  }
  if (!ok || (content_length_ && *content_length_ != n)) {
    return fail("invalid or conflicting Content-Length in CGI response");
  }
  content_length_ = n;
  return kNeedMore;
}

// head_ stops changing here, so views into it can be handed out.
void CgiHeadParser::complete() {
  state_ = kComplete;
  headers_.clear();
  for (const FieldSpan& f : spans_) {
    const std::string_view name = std::string_view(head_).substr(f.name, f.name_len);
    headers_.push_back({.name = name,
                        .value = std::string_view(head_).substr(f.value, f.value_len),
                        .id = http::field_id(name)});
  }
  reason_ = std::string_view(head_).substr(reason_start_, reason_len_);
  if (!has_status_) status_ = has_location_ ? 302 : 200;
}

std::string_view CgiHeadParser::header(std::string_view name) const {
  for (const http::Header& h : headers()) {
    if (http::iequals(h.name, name)) return h.value;
  }
  return {};
}

}  // namespace tern::fastcgi
