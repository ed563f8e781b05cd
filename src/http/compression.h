// Compression: gzip (zlib) and brotli for response bodies, on the fly.
//
// A CompressionPolicy says which responses may be compressed (media types,
// a minimum and a maximum size, the codings and their levels); choose()
// picks the coding a request's Accept-Encoding prefers, honouring q-values
// ("br;q=0" refuses brotli, "*" stands for what is not listed) and, at equal
// q, brotli over gzip. A Compressor turns a body into a coded stream piece
// by piece: each write() returns what is ready (flushed, so that a stream
// of server-sent events is not held back), finish() the end.
//
// The ResponseWriter applies a policy as an output filter (compress_for());
// the static files use a Compressor directly for the small files they keep
// in memory, and keep the result. Any thread; a Compressor is one stream's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tern::http {

// A content coding of a response body (RFC 9110 8.4.1).
enum class Coding { kIdentity, kGzip, kBrotli };

// "gzip", "br", or "" for identity.
std::string_view coding_name(Coding coding);

// The q-value (in thousandths, 0 to 1000) an Accept-Encoding value gives
// `coding` ("gzip" also answers to "x-gzip"; "*" stands for a coding not
// listed), or -1 when neither is listed. Compared without case; a garbled
// q-value counts as 0.
int accepted_q(std::string_view accept_encoding, std::string_view coding);

// Which responses are compressed, and how.
struct CompressionPolicy {
  bool gzip = true;    // whether gzip is offered
  bool brotli = true;  // whether brotli is offered
  int gzip_level = 5;      // 1..9
  int brotli_quality = 4;  // 0..11; higher is much slower on the fly
  uint64_t min_length = 256;         // smaller bodies are sent as they are
  uint64_t max_file = 1024 * 1024;   // larger files are not compressed on the fly
  // Media types compressed (compared without parameters and case).
  std::vector<std::string> types = {"text/html",
                                    "text/css",
                                    "text/plain",
                                    "text/xml",
                                    "text/javascript",
                                    "application/javascript",
                                    "application/json",
                                    "application/xml",
                                    "application/rss+xml",
                                    "application/atom+xml",
                                    "application/manifest+json",
                                    "application/wasm",
                                    "image/svg+xml"};

  // Whether a response of this Content-Type may be compressed at all.
  bool compressible(std::string_view content_type) const;
  // The coding to use for a request with this Accept-Encoding value.
  Coding choose(std::string_view accept_encoding) const;
};

// One body's coded stream.
class Compressor {
 public:
  // A stream in `coding` (gzip or brotli) at the policy's level.
  Compressor(Coding coding, const CompressionPolicy& policy);

  ~Compressor();
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;

  // Appends the coded form of `data` to *out, flushed.
  void write(std::string_view data, std::string* out);
  // Appends the end of the stream to *out.
  void finish(std::string* out);

  // The whole of `data`, coded.
  static std::string compress(Coding coding, const CompressionPolicy& policy, std::string_view data);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tern::http
