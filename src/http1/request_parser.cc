#include "http1/request_parser.h"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/assert.h"
#include "http/chars.h"

namespace tern::http {

// The scanner is a loop over states; each state function examines bytes from
// pos_ and either moves to the next state (Step::kNext), stops at the end of
// the available bytes with pos_ at the first byte it has not accepted
// (kStarved), fails, or reaches the empty line that ends the head. Only
// offsets are kept between calls, so the caller's buffer may move. Nothing
// before pos_ is scanned again on resume, with two small exceptions: the
// version (ten bytes) is matched whole once it has arrived, and the name of a
// field line that was split is read again when its CR arrives.
//
// Every decision depends only on bytes already seen, never on where the
// input happens to end, so a request gives the same answer whole or split
// anywhere; the tests check this at every offset.
enum class RequestParser::Step : uint8_t { kNext, kStarved, kFailed, kHeadEnd };

namespace {

enum State : uint8_t {
  kEmptyLines,  // skipping CRLFs before the request line
  kMethod,
  kTarget,
  kVersion,     // pos_ is at "HTTP/x.y\r\n"
  kFieldStart,  // pos_ starts a field line or the final CRLF
  kFieldLine,   // scanning a field line for its CR; line_start_ is set
  kDone,
  kFailed,
};

using chars::is_tchar;
using chars::is_vchar;

// kTchar is the table's lowest bit, so four lookups and'ed say "all tchar".
static_assert(chars::kTchar == 1);
uint8_t tchar(const char* p, size_t i) {
  return chars::kTable[static_cast<unsigned char>(p[i])] & chars::kTchar;
}
// Field-line bytes: no CTL but HTAB, no DEL; obs-text (>= 0x80) included.
bool is_line_byte(char c) { return chars::is_field_text(c); }

// The skip_* helpers return the first index in [i, end) whose byte is not in
// their class, or end. They hold the loops that see most of the bytes of a
// head, so they test several bytes per branch.

#if defined(__SSE2__)
__m128i load16(const char* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

// Lanes of v that are <= n, as unsigned bytes.
__m128i at_most(__m128i v, char n) { return _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(n)), v); }

size_t first_lane(unsigned mask) { return static_cast<size_t>(std::countr_zero(mask)); }

// Lanes holding a letter, a digit or '-', which is nearly every byte of a
// field name; the table judges the rest.
unsigned common_name_lanes(__m128i v) {
  __m128i lower = _mm_or_si128(v, _mm_set1_epi8(0x20));
  __m128i alpha = at_most(_mm_sub_epi8(lower, _mm_set1_epi8('a')), 25);
  __m128i digit = at_most(_mm_sub_epi8(v, _mm_set1_epi8('0')), 9);
  __m128i dash = _mm_cmpeq_epi8(v, _mm_set1_epi8('-'));
  return static_cast<unsigned>(_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(alpha, digit), dash)));
}
#endif

size_t skip_tchars(const char* p, size_t i, size_t end) {
#if defined(__SSE2__)
  while (i + 16 <= end) {
    unsigned common = common_name_lanes(load16(p + i));
    if (common == 0xffff) {
      i += 16;
      continue;
    }
    i += first_lane(~common);
    if (!is_tchar(p[i])) return i;
    ++i;  // a rarer tchar, such as '_' or '.'
  }
#endif
  // Four table loads per branch beat one branch per byte.
  while (i + 4 <= end && (tchar(p, i) & tchar(p, i + 1) & tchar(p, i + 2) & tchar(p, i + 3))) {
    i += 4;
  }
  while (i < end && is_tchar(p[i])) ++i;
  return i;
}

// Field lines: stops at CTLs other than HTAB (CR ends the line) and DEL.
size_t skip_line_bytes(const char* p, size_t i, size_t end) {
#if defined(__SSE2__)
  for (; i + 16 <= end; i += 16) {
    __m128i v = load16(p + i);
    __m128i ctl = _mm_andnot_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\t')), at_most(v, 0x1f));
    __m128i stop = _mm_or_si128(ctl, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f)));
    if (auto mask = static_cast<unsigned>(_mm_movemask_epi8(stop))) return i + first_lane(mask);
  }
#endif
  while (i < end && is_line_byte(p[i])) ++i;
  return i;
}

// Request-targets: stops at anything outside VCHAR (the SP after it, or junk).
size_t skip_vchars(const char* p, size_t i, size_t end) {
#if defined(__SSE2__)
  for (; i + 16 <= end; i += 16) {
    __m128i v = load16(p + i);
    __m128i stop = _mm_or_si128(at_most(v, 0x20), _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f)));
    // movemask of v itself flags the bytes >= 0x80.
    auto mask = static_cast<unsigned>(_mm_movemask_epi8(stop) | _mm_movemask_epi8(v));
    if (mask != 0) return i + first_lane(mask);
  }
#endif
  while (i < end && is_vchar(p[i])) ++i;
  return i;
}

}  // namespace

size_t RequestParser::head_limit() const {
  return std::min<size_t>(limits_.max_head_bytes, std::numeric_limits<uint32_t>::max());
}

RequestParser::Step RequestParser::failed(int status, std::string_view reason) {
  state_ = kFailed;
  error_status_ = status;
  error_reason_ = reason;
  return Step::kFailed;
}

void RequestParser::reset() {
  error_status_ = 0;
  error_reason_ = {};
  state_ = kEmptyLines;
  version_ = Version::kHttp11;
  pos_ = request_start_ = method_end_ = target_start_ = target_end_ = 0;
  line_start_ = header_count_ = 0;
}

ParseStatus RequestParser::parse(std::string_view data, Request* request) {
  if (state_ == kFailed) return ParseStatus::kError;
  if (state_ != kDone) {
    TERN_CHECK_MSG(data.size() >= pos_, "RequestParser: data shrank from {} to {} bytes", pos_,
                   data.size());
    const size_t limit = head_limit();
    Step step = scan(data.data(), std::min(data.size(), limit));
    if (step == Step::kFailed) return ParseStatus::kError;
    if (step == Step::kStarved) {
      // Starved at the limit, not at the end of the data: the head is longer.
      if (data.size() > limit) {
        failed(431, "header section too large");
        return ParseStatus::kError;
      }
      return ParseStatus::kNeedMore;
    }
    state_ = kDone;
  }
  return finish(data, request);
}

RequestParser::Step RequestParser::scan(const char* p, size_t end) {
  Step step = Step::kNext;
  while (step == Step::kNext) {
    switch (state_) {
      case kEmptyLines: step = skip_empty_lines(p, end); break;
      case kMethod: step = scan_method(p, end); break;
      case kTarget: step = scan_target(p, end); break;
      case kVersion: step = scan_version(p, end); break;
      default: step = scan_fields(p, end); break;
    }
  }
  return step;
}

// Field lines are most of a head, so they get one tight loop with the
// position in a local. A line is found by scanning for its CR alone; the
// colon, the name check and the OWS trimming come after, in add_field(), off
// the chain of loads from one line start to the next, so the CPU overlaps
// them with the scan of the next line. (Scanning name, then OWS, then value
// made each line three dependent steps; the benchmark took half as long again.)
RequestParser::Step RequestParser::scan_fields(const char* p, size_t end) {
  const size_t max_fields = limits_.max_headers;
  size_t i = pos_;
  bool mid_line = state_ == kFieldLine;  // resuming inside a line
  for (;; mid_line = false) {
    if (!mid_line) {
      if (i == end || !is_tchar(p[i]) || header_count_ == max_fields) {
        return line_start_stop(p, i, end);
      }
      line_start_ = i;
    }
    i = skip_line_bytes(p, i, end);
    if (i + 1 >= end || p[i] != '\r' || p[i + 1] != '\n') return line_stop(p, i, end);
    if (!add_field(p, i)) return Step::kFailed;
    i += 2;
  }
}

RequestParser::Step RequestParser::stop(size_t pos, uint8_t state, Step step) {
  pos_ = pos;
  state_ = state;
  return step;
}

// RFC 9112 2.2 lets a server skip empty lines before the request line. A bare
// LF is refused here as everywhere: 2.2 also allows a recipient to accept it
// as a line end, but that is exactly where parsers disagree on message
// boundaries, so we answer 400 instead.
RequestParser::Step RequestParser::skip_empty_lines(const char* p, size_t end) {
  while (pos_ < end) {
    char c = p[pos_];
    if (c == '\n') return failed(400, "bare LF");
    if (c != '\r') {
      request_start_ = pos_;
      state_ = kMethod;
      return Step::kNext;
    }
    if (pos_ + 1 >= end) return Step::kStarved;
    if (p[pos_ + 1] != '\n') return failed(400, "bare CR");
    pos_ += 2;
  }
  return Step::kStarved;
}

RequestParser::Step RequestParser::scan_method(const char* p, size_t end) {
  const size_t i = pos_ = skip_tchars(p, pos_, end);
  if (i == end) return Step::kStarved;
  if (p[i] != ' ') return failed(400, "invalid byte in method");
  if (i == request_start_) return failed(400, "empty method");
  method_end_ = i;
  target_start_ = pos_ = i + 1;
  state_ = kTarget;
  return Step::kNext;
}

// The scan stops one byte past max_target, so an over-long target is refused
// (414) before it is complete.
RequestParser::Step RequestParser::scan_target(const char* p, size_t end) {
  const size_t cap = std::min(end, target_start_ + limits_.max_target + 1);
  const size_t i = pos_ = skip_vchars(p, pos_, cap);
  if (i == cap) {
    if (cap == end && i - target_start_ <= limits_.max_target) return Step::kStarved;
    return failed(414, "request-target too long");
  }
  if (p[i] != ' ') return failed(400, "invalid byte in request-target");
  if (i == target_start_) return failed(400, "empty request-target");
  target_end_ = i;
  pos_ = i + 1;
  state_ = kVersion;
  return Step::kNext;
}

// "HTTP/" DIGIT "." DIGIT CRLF, matched byte by byte as far as it has
// arrived, so garbage fails early; a well-formed version with a major number
// other than 1 is 505 (RFC 9110 15.6.6), anything else malformed 400.
RequestParser::Step RequestParser::scan_version(const char* p, size_t end) {
  static constexpr std::string_view kShape = "HTTP/9.9\r\n";
  if (end - pos_ >= kShape.size()) {  // the usual case, in two compares
    std::string_view v(p + pos_, kShape.size());
    if (v == "HTTP/1.1\r\n" || v == "HTTP/1.0\r\n") {
      version_ = v[7] == '0' ? Version::kHttp10 : Version::kHttp11;
      pos_ += kShape.size();
      state_ = kFieldStart;
      return Step::kNext;
    }
  }
  const size_t avail = std::min(end - pos_, kShape.size());
  for (size_t i = 0; i < avail; ++i) {
    char c = p[pos_ + i];
    bool ok = kShape[i] == '9' ? (c >= '0' && c <= '9') : c == kShape[i];
    if (ok) continue;
    if (i == 8 && c == '\n') return failed(400, "bare LF");
    return failed(400, i >= 8 ? "junk after HTTP version" : "malformed HTTP version");
  }
  if (avail < kShape.size()) return Step::kStarved;
  // RFC 9110 2.5: a later minor version of HTTP/1 is answered as the
  // highest we speak, 1.1; only another major version is refused.
  char major = p[pos_ + 5], minor = p[pos_ + 7];
  if (major != '1') return failed(505, "HTTP version not supported");
  version_ = minor == '0' ? Version::kHttp10 : Version::kHttp11;
  pos_ += kShape.size();
  state_ = kFieldStart;
  return Step::kNext;
}

// At the first byte of a line that does not simply start a field name.
RequestParser::Step RequestParser::line_start_stop(const char* p, size_t i, size_t end) {
  stop(i, kFieldStart, Step::kStarved);
  if (i == end) return Step::kStarved;
  if (p[i] == '\r') {
    if (i + 1 == end) return Step::kStarved;
    if (p[i + 1] != '\n') return failed(400, "bare CR");
    return stop(i + 2, kDone, Step::kHeadEnd);
  }
  if (p[i] == '\n') return failed(400, "bare LF");
  // A line starting with whitespace is obs-fold (RFC 9112 5.2), or, on the
  // first line, whitespace before the first field (2.2); both are refused.
  if (p[i] == ' ' || p[i] == '\t') return failed(400, "obs-fold or whitespace before field");
  if (header_count_ == limits_.max_headers) {
    return failed(431, "too many header fields");
  }
  return failed(400, p[i] == ':' ? "empty field name" : "invalid byte in field name");
}

RequestParser::Step RequestParser::line_stop(const char* p, size_t i, size_t end) {
  stop(i, kFieldLine, Step::kStarved);
  if (i == end || (p[i] == '\r' && i + 1 == end)) return Step::kStarved;
  if (p[i] == '\r') return failed(400, "bare CR");
  if (p[i] == '\n') return failed(400, "bare LF");
  return failed(400, p[i] == 0 ? "NUL in field line" : "control character in field line");
}

// Records the field line [line_start_, cr): name up to the colon, value
// without OWS on either side (RFC 9112 5). The scan up to cr has already
// refused CTLs and DEL; the name must also be a non-empty token.
bool RequestParser::add_field(const char* p, size_t cr) {
  const size_t colon = skip_tchars(p, line_start_, cr);
  if (colon == cr || p[colon] != ':') {
    // RFC 9112 5.1: whitespace before the colon MUST be rejected with 400.
    bool space = colon < cr && (p[colon] == ' ' || p[colon] == '\t');
    failed(400, space ? "whitespace before colon" : "invalid field name");
    return false;
  }
  size_t value_start = colon + 1, value_end = cr;
  while (value_start < cr && (p[value_start] == ' ' || p[value_start] == '\t')) ++value_start;
  while (value_end > value_start && (p[value_end - 1] == ' ' || p[value_end - 1] == '\t')) {
    --value_end;
  }
  if (header_count_ == span_capacity_) grow_spans();
  spans_[header_count_++] = {static_cast<uint32_t>(line_start_),
                             static_cast<uint32_t>(colon - line_start_),
                             static_cast<uint32_t>(value_start),
                             static_cast<uint32_t>(value_end - value_start)};
  return true;
}

void RequestParser::grow_spans() {
  span_storage_.resize(std::max<size_t>(32, span_storage_.size() * 2));
  spans_ = span_storage_.data();
  span_capacity_ = span_storage_.size();
}

// Builds the Request from offsets into this call's data, then runs the checks
// that need the whole head. Called again after kComplete (the caller's buffer
// may have moved), it rebuilds the views and gives the same answer.
ParseStatus RequestParser::finish(std::string_view data, Request* request) {
  fill(data, request);
  std::string_view reason;
  if (int status = request->interpret_head({}, &reason); status != 0) {
    failed(status, reason);
    return ParseStatus::kError;
  }
  return ParseStatus::kComplete;
}

void RequestParser::fill(std::string_view data, Request* request) const {
  Request& r = *request;
  r.method_text_ = data.substr(request_start_, method_end_ - request_start_);
  r.method_ = method_from_token(r.method_text_);
  r.target_ = data.substr(target_start_, target_end_ - target_start_);
  r.version_ = version_;
  r.header_count_ = header_count_;
  if (r.headers_.size() < header_count_) r.headers_.resize(header_count_);
  const char* base = data.data();
  Header* out = r.headers_.data();
  for (size_t i = 0; i < header_count_; ++i) {
    const Span& s = spans_[i];
    const std::string_view name(base + s.name_start, s.name_len);
    out[i] = {name, {base + s.value_start, s.value_len}, field_id(name)};
  }
  r.head_size_ = pos_;
  r.head_at_ = data.data();
}

}  // namespace tern::http
