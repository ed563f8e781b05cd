// ChunkedDecoder: decodes a request body sent with Transfer-Encoding: chunked
// (RFC 9112 section 7.1), incrementally and without copying.
//
// Feed it the bytes after the request head as they arrive; each call to
// next() either yields a span of body data (pointing into the input), or
// reports that more input is needed, that the body (and its trailer section)
// is complete, or an error. Chunk extensions are checked against their
// grammar and skipped; trailer fields are read, bounded, and discarded.
// Framing bytes are consumed as they are read: a caller that drops what
// next() consumed keeps no framing in memory.
//
//   size_t used; std::string_view data;
//   for (;;) {
//     auto s = decoder.next(input, &used, &data);
//     input.remove_prefix(used);
//     if (s == ChunkedDecoder::kData) consume(data); else break;
//   }
//
// Errors (the connection must be closed after answering): a chunk size that
// is not hex, is empty, has more than 16 digits or overflows (400); a chunk
// extension outside RFC 9112 7.1.1's grammar or a size line over max_line
// (400); a missing CRLF after chunk data (400); a body over max_body (413);
// framing (sizes, extensions, CRLFs, trailers) over max_framing (413), so
// the raw bytes of a body are bounded and not only the decoded ones; a
// trailer section over max_trailer_bytes (431); bare LF or CR or NUL in
// framing (400).
//
// One decoder per request. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tern::http {

class ChunkedDecoder {
 public:
  enum Status : uint8_t { kData, kNeedMore, kDone, kError };

  struct Limits {
    uint64_t max_body = 1024 * 1024;
    size_t max_line = 1024;          // a chunk-size line, with extensions
    size_t max_trailer_bytes = 8192;
    uint64_t max_framing = 64 * 1024;  // every byte that is not body data
  };

  // The framing allowance for a body limit: 64 KiB, plus an eighth of the
  // limit (a body sent in 100-byte chunks needs about 7%).
  static uint64_t framing_allowance(uint64_t max_body) { return 64 * 1024 + max_body / 8; }

  ChunkedDecoder() = default;
  explicit ChunkedDecoder(Limits limits) : limits_(limits) {}

  // Consumes a prefix of `input` (*consumed bytes). kData: *data is body
  // bytes inside input. kNeedMore: all of input was consumed or kept pending
  // (call again with more; bytes not consumed must be passed again). kDone:
  // the last chunk and trailers are through; *consumed ends at the end of the
  // message. kError: see error_status().
  Status next(std::string_view input, size_t* consumed, std::string_view* data);

  void reset();
  uint64_t body_bytes() const { return body_bytes_; }
  int error_status() const { return error_status_; }
  std::string_view error_reason() const { return error_reason_; }

 private:
  Status step(char c);
  Status size_byte(char c);
  Status extension_byte(char c);
  Status extension_end(char c);
  Status trailer_byte(char c);
  Status end_of_size();
  Status fail(int status, std::string_view reason);

  Limits limits_;
  uint8_t state_ = 0;        // see the State enum in chunked_decoder.cc
  uint64_t chunk_left_ = 0;  // data bytes still due in this chunk
  uint64_t body_bytes_ = 0;  // data bytes handed out so far
  uint64_t framing_bytes_ = 0;
  size_t line_bytes_ = 0;    // bytes in the current chunk-size or trailer line
  size_t trailer_bytes_ = 0;
  int size_digits_ = 0;
  int error_status_ = 0;
  std::string_view error_reason_;
};

}  // namespace tern::http
