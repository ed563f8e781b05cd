#include "http1/chunked_decoder.h"

#include <algorithm>

#include "http/chars.h"

namespace tern::http {
namespace {

// Framing bytes (sizes, extensions, CRLFs, trailers) go through step() one at
// a time and are consumed as they are read, so nothing is ever re-read and
// the caller need not keep a partial line; data bytes are handed out as spans
// of the input without being looked at.
enum State : uint8_t {
  kSize,          // chunk-size hex digits
  kSizeSpace,     // BWS after the size: only ';' may follow
  // chunk-ext (RFC 9112 7.1.1), one state per position in its grammar:
  kExtName0,      // after ';': BWS, then the first tchar of a name
  kExtName,       // in a name: tchar, or BWS, '=', ';', CR
  kExtNameSpace,  // BWS after a name: '=' or ';'
  kExtValue0,     // after '=': BWS, then a token or a quoted-string
  kExtToken,      // in a token value: tchar, or BWS, ';', CR
  kExtQuoted,     // inside a quoted-string
  kExtEscape,     // after a backslash in a quoted-string
  kExtQuoteEnd,   // after the closing quote: ';', CR or BWS
  kExtSpace,      // BWS after a value: only ';' may follow
  kSizeLf,        // CR seen at the end of the chunk-size line
  kChunkData,
  kDataCr,        // after chunk data
  kDataLf,
  kTrailerStart,  // a trailer field line, or the CRLF ending the message
  kTrailerName,
  kTrailerValue,
  kTrailerLf,
  kEndLf,
  kMessageDone,
  kFailed,
};

using chars::hex_value;
using chars::is_tchar;
// Field values: anything but CTLs (HTAB excepted) and DEL.
bool text_byte(char c) { return chars::is_field_text(c); }
bool is_bws(char c) { return chars::is_ows(c); }

}  // namespace

void ChunkedDecoder::reset() {
  state_ = kSize;
  chunk_left_ = body_bytes_ = framing_bytes_ = 0;
  line_bytes_ = trailer_bytes_ = 0;
  size_digits_ = 0;
  error_status_ = 0;
  error_reason_ = {};
}

ChunkedDecoder::Status ChunkedDecoder::fail(int status, std::string_view reason) {
  state_ = kFailed;
  error_status_ = status;
  error_reason_ = reason;
  return kError;
}

ChunkedDecoder::Status ChunkedDecoder::next(std::string_view input, size_t* consumed,
                                            std::string_view* data) {
  *consumed = 0;
  *data = {};
  if (state_ == kMessageDone) return kDone;
  if (state_ == kFailed) return kError;
  size_t i = 0;
  while (i < input.size()) {
    if (state_ == kChunkData) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(chunk_left_, input.size() - i));
      *data = input.substr(i, n);
      *consumed = i + n;
      chunk_left_ -= n;
      body_bytes_ += n;
      if (chunk_left_ == 0) state_ = kDataCr;
      return kData;
    }
    Status s = step(input[i++]);
    if (s != kNeedMore) {
      *consumed = i;
      return s;
    }
  }
  *consumed = i;
  return kNeedMore;
}

// One framing byte; kNeedMore means "carry on".
ChunkedDecoder::Status ChunkedDecoder::step(char c) {
  if (++framing_bytes_ > limits_.max_framing) return fail(413, "chunked framing too large");
  switch (state_) {
    case kSize:
    case kSizeSpace: return size_byte(c);
    case kExtName0:
    case kExtName:
    case kExtNameSpace:
    case kExtValue0:
    case kExtToken:
    case kExtQuoted:
    case kExtEscape:
    case kExtQuoteEnd:
    case kExtSpace:
      if (++line_bytes_ > limits_.max_line) return fail(400, "chunk-size line too long");
      return extension_byte(c);
    case kSizeLf:
      if (c != '\n') return fail(400, "bare CR after chunk size");
      line_bytes_ = 0;
      state_ = chunk_left_ == 0 ? kTrailerStart : kChunkData;
      return kNeedMore;
    case kDataCr:
      if (c != '\r') return fail(400, "missing CRLF after chunk data");
      state_ = kDataLf;
      return kNeedMore;
    case kDataLf:
      if (c != '\n') return fail(400, "bare CR after chunk data");
      state_ = kSize;
      size_digits_ = 0;
      return kNeedMore;
    default: return trailer_byte(c);
  }
}

// chunk-size [ chunk-ext ] CRLF (RFC 9112 7.1.1).
ChunkedDecoder::Status ChunkedDecoder::size_byte(char c) {
  if (++line_bytes_ > limits_.max_line) return fail(400, "chunk-size line too long");
  if (state_ == kSize) {
    int v = hex_value(c);
    if (v >= 0) {
      if (++size_digits_ > 16) return fail(400, "chunk size has more than 16 digits");
      chunk_left_ = chunk_left_ * 16 + static_cast<uint64_t>(v);
      return kNeedMore;
    }
    if (Status s = end_of_size(); s != kNeedMore) return s;
  }
  if (c == ';') {
    state_ = kExtName0;
  } else if (c == '\r' && state_ == kSize) {
    state_ = kSizeLf;
  } else if (c != ' ' && c != '\t') {
    return fail(400, c == '\n' ? "bare LF after chunk size" : "invalid chunk size");
  } else {
    state_ = kSizeSpace;
  }
  return kNeedMore;
}

// The first byte after the digits: the size is known, so the body limit can
// be enforced before any of the chunk arrives.
ChunkedDecoder::Status ChunkedDecoder::end_of_size() {
  if (size_digits_ == 0) return fail(400, "missing chunk size");
  if (chunk_left_ > limits_.max_body - std::min(limits_.max_body, body_bytes_)) {
    return fail(413, "chunked body too large");
  }
  return kNeedMore;
}

// chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
// chunk-ext-name = token; chunk-ext-val = token / quoted-string. Nothing
// reads the extensions, but one parser's "skipped" is another's framing:
// anything outside the grammar is refused rather than guessed at.
ChunkedDecoder::Status ChunkedDecoder::extension_byte(char c) {
  if (c == '\n') return fail(400, "bare LF in chunk extension");
  if (!text_byte(c) && c != '\r') return fail(400, "control character in chunk extension");
  switch (state_) {
    case kExtName0:
      if (is_bws(c)) return kNeedMore;
      if (!is_tchar(c)) return fail(400, "malformed chunk extension name");
      state_ = kExtName;
      return kNeedMore;
    case kExtName:
      if (is_tchar(c)) return kNeedMore;
      if (is_bws(c)) {
        state_ = kExtNameSpace;
        return kNeedMore;
      }
      if (c == '=') {
        state_ = kExtValue0;
        return kNeedMore;
      }
      return extension_end(c);
    case kExtNameSpace:
      if (is_bws(c)) return kNeedMore;
      if (c == '=') {
        state_ = kExtValue0;
        return kNeedMore;
      }
      if (c == ';') return extension_end(c);
      return fail(400, "malformed chunk extension");
    case kExtValue0:
      if (is_bws(c)) return kNeedMore;
      if (c == '"') {
        state_ = kExtQuoted;
      } else if (is_tchar(c)) {
        state_ = kExtToken;
      } else {
        return fail(400, "malformed chunk extension value");
      }
      return kNeedMore;
    case kExtToken:
      if (is_tchar(c)) return kNeedMore;
      if (is_bws(c)) {
        state_ = kExtSpace;
        return kNeedMore;
      }
      return extension_end(c);
    case kExtQuoted:
      // qdtext: HTAB, SP, VCHAR but '"' and '\', obs-text.
      if (c == '"') state_ = kExtQuoteEnd;
      if (c == '\\') state_ = kExtEscape;
      if (c == '\r') return fail(400, "unterminated quoted chunk extension value");
      return kNeedMore;
    case kExtEscape:
      if (c == '\r') return fail(400, "unterminated quoted chunk extension value");
      state_ = kExtQuoted;
      return kNeedMore;
    case kExtQuoteEnd:
      if (is_bws(c)) {
        state_ = kExtSpace;
        return kNeedMore;
      }
      return extension_end(c);
    default:  // kExtSpace
      if (is_bws(c)) return kNeedMore;
      if (c == ';') return extension_end(c);
      return fail(400, "malformed chunk extension");
  }
}

// Where an extension may end: ';' starts another, CR ends the line.
ChunkedDecoder::Status ChunkedDecoder::extension_end(char c) {
  if (c == ';') {
    state_ = kExtName0;
    return kNeedMore;
  }
  if (c == '\r') {
    state_ = kSizeLf;
    return kNeedMore;
  }
  return fail(400, "malformed chunk extension");
}

// trailer-section = *( field-line CRLF ) CRLF, read with the same strictness
// as the head and then dropped: nothing here forwards or merges trailers.
ChunkedDecoder::Status ChunkedDecoder::trailer_byte(char c) {
  if (++trailer_bytes_ > limits_.max_trailer_bytes) return fail(431, "trailer section too large");
  if (c == '\n' && state_ != kTrailerLf && state_ != kEndLf) {
    return fail(400, "bare LF in trailer section");
  }
  switch (state_) {
    case kTrailerStart:
      if (c == ' ' || c == '\t') return fail(400, "obs-fold in trailer section");
      if (c != '\r' && !is_tchar(c)) return fail(400, "invalid trailer field name");
      state_ = c == '\r' ? kEndLf : kTrailerName;
      return kNeedMore;
    case kTrailerName:
      if (c != ':' && !is_tchar(c)) return fail(400, "invalid trailer field name");
      if (c == ':') state_ = kTrailerValue;
      return kNeedMore;
    case kTrailerValue:
      if (!text_byte(c) && c != '\r') return fail(400, "control character in trailer field");
      if (c == '\r') state_ = kTrailerLf;
      return kNeedMore;
    case kTrailerLf:
      if (c != '\n') return fail(400, "bare CR in trailer section");
      state_ = kTrailerStart;
      return kNeedMore;
    default:  // kEndLf
      if (c != '\n') return fail(400, "bare CR at end of chunked body");
      state_ = kMessageDone;
      return kDone;
  }
}

}  // namespace tern::http
