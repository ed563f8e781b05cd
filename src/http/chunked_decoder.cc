#include "http/chunked_decoder.h"

#include <algorithm>

namespace tern::http {
namespace {

// Framing bytes (sizes, extensions, CRLFs, trailers) go through step() one at
// a time and are consumed as they are read, so nothing is ever re-read and
// the caller need not keep a partial line; data bytes are handed out as spans
// of the input without being looked at.
enum State : uint8_t {
  kSize,          // chunk-size hex digits
  kSizeSpace,     // BWS after the size: only ';' may follow
  kExtension,     // skipping chunk-ext up to CR
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

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool is_tchar(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  for (char t : std::string_view("!#$%&'*+-.^_`|~")) {
    if (c == t) return true;
  }
  return false;
}

// Field values and extensions: anything but CTLs (HTAB excepted) and DEL.
bool text_byte(char c) {
  auto u = static_cast<unsigned char>(c);
  return (u >= 0x20 && u != 0x7f) || u == '\t';
}

}  // namespace

void ChunkedDecoder::reset() {
  state_ = kSize;
  chunk_left_ = body_bytes_ = 0;
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
  switch (state_) {
    case kSize:
    case kSizeSpace:
    case kExtension: return size_byte(c);
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

// chunk-size [ chunk-ext ] CRLF, where chunk-ext = *( BWS ";" BWS ext-name
// [ BWS "=" BWS ext-val ] ) (RFC 9112 7.1.1). Extensions are only skipped, so
// they are only checked for bytes that could confuse framing.
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
  if (state_ == kExtension) return extension_byte(c);
  if (c == ';') {
    state_ = kExtension;
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

ChunkedDecoder::Status ChunkedDecoder::extension_byte(char c) {
  if (c == '\r') {
    state_ = kSizeLf;
    return kNeedMore;
  }
  if (c == '\n') return fail(400, "bare LF in chunk extension");
  if (!text_byte(c)) return fail(400, "control character in chunk extension");
  return kNeedMore;
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
