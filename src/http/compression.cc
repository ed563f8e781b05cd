#include "http/compression.h"

#include <brotli/encode.h>
#include <zlib.h>

#include <algorithm>

#include "base/assert.h"
#include "http/chars.h"
#include "http/request.h"

namespace tern::http {
namespace {

constexpr size_t kChunk = 16 * 1024;

// The q-value of an Accept-Encoding element's parameters, in thousandths;
// 1000 when there is none, 0 when it is garbled.
int q_value(std::string_view params) {
  while (!params.empty()) {
    size_t semicolon = params.find(';');
    std::string_view param = chars::trim_ows(params.substr(0, semicolon));
    params = semicolon == std::string_view::npos ? std::string_view() : params.substr(semicolon + 1);
    size_t eq = param.find('=');
    if (eq == std::string_view::npos || !iequals(chars::trim_ows(param.substr(0, eq)), "q")) continue;
    std::string_view value = chars::trim_ows(param.substr(eq + 1));
    if (value.empty() || (value[0] != '0' && value[0] != '1')) return 0;
    int q = value[0] == '1' ? 1000 : 0;
    if (value.size() > 1) {
      if (value[1] != '.') return 0;
      int scale = 100;
      for (char ch : value.substr(2)) {
        if (!chars::is_digit(ch) || scale == 0) return 0;
        q += (ch - '0') * scale;
        scale /= 10;
      }
    }
    return std::min(q, 1000);
  }
  return 1000;
}

}  // namespace

std::string_view coding_name(Coding coding) {
  switch (coding) {
    case Coding::kGzip: return "gzip";
    case Coding::kBrotli: return "br";
    case Coding::kIdentity: break;
  }
  return "";
}

bool CompressionPolicy::compressible(std::string_view content_type) const {
  std::string_view media = chars::trim_ows(content_type.substr(0, content_type.find(';')));
  return std::any_of(types.begin(), types.end(), [media](const std::string& t) { return iequals(t, media); });
}

int accepted_q(std::string_view accept_encoding, std::string_view coding) {
  int listed = -1, star = -1;
  while (!accept_encoding.empty()) {
    size_t comma = accept_encoding.find(',');
    std::string_view element = accept_encoding.substr(0, comma);
    accept_encoding = comma == std::string_view::npos ? std::string_view() : accept_encoding.substr(comma + 1);
    size_t semicolon = element.find(';');
    std::string_view name = chars::trim_ows(element.substr(0, semicolon));
    int q = semicolon == std::string_view::npos ? 1000 : q_value(element.substr(semicolon + 1));
    if (iequals(name, coding) || (coding == "gzip" && iequals(name, "x-gzip"))) {
      listed = std::max(listed, q);
    } else if (name == "*") {
      star = std::max(star, q);
    }
  }
  return listed >= 0 ? listed : star;
}

Coding CompressionPolicy::choose(std::string_view accept_encoding) const {
  const int gzip_q = gzip ? accepted_q(accept_encoding, "gzip") : 0;
  const int br_q = brotli ? accepted_q(accept_encoding, "br") : 0;
  if (br_q > 0 && br_q >= gzip_q) return Coding::kBrotli;
  if (gzip_q > 0) return Coding::kGzip;
  return Coding::kIdentity;
}

struct Compressor::State {
  Coding coding;
  z_stream zs{};
  BrotliEncoderState* br = nullptr;
};

Compressor::Compressor(Coding coding, const CompressionPolicy& policy) : state_(std::make_unique<State>()) {
  state_->coding = coding;
  if (coding == Coding::kGzip) {
    // 15 + 16: a gzip wrapper; 8: the usual memory level.
    const int rc = deflateInit2(&state_->zs, std::clamp(policy.gzip_level, 1, 9), Z_DEFLATED, 15 + 16, 8,
                                Z_DEFAULT_STRATEGY);
    TERN_CHECK_MSG(rc == Z_OK, "deflateInit2 failed: {}", rc);
  } else if (coding == Coding::kBrotli) {
    state_->br = BrotliEncoderCreateInstance(nullptr, nullptr, nullptr);
    TERN_CHECK_MSG(state_->br != nullptr, "BrotliEncoderCreateInstance failed");
    BrotliEncoderSetParameter(state_->br, BROTLI_PARAM_QUALITY,
                              static_cast<uint32_t>(std::clamp(policy.brotli_quality, 0, 11)));
    // A smaller window than the default 22 bits: less memory per stream.
    BrotliEncoderSetParameter(state_->br, BROTLI_PARAM_LGWIN, 18);
  }
}

Compressor::~Compressor() {
  if (state_->coding == Coding::kGzip) deflateEnd(&state_->zs);
  if (state_->br != nullptr) BrotliEncoderDestroyInstance(state_->br);
}

namespace {

void run_deflate(z_stream& zs, std::string_view data, int flush, std::string* out) {
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  do {
    const size_t at = out->size();
    out->resize(at + kChunk);
    zs.next_out = reinterpret_cast<Bytef*>(out->data() + at);
    zs.avail_out = static_cast<uInt>(kChunk);
    const int rc = deflate(&zs, flush);
    TERN_CHECK_MSG(rc != Z_STREAM_ERROR, "deflate: stream error");
    out->resize(at + kChunk - zs.avail_out);
  } while (zs.avail_out == 0 || zs.avail_in > 0);
}

void run_brotli(BrotliEncoderState* br, std::string_view data, BrotliEncoderOperation op, std::string* out) {
  size_t available_in = data.size();
  const uint8_t* next_in = reinterpret_cast<const uint8_t*>(data.data());
  for (;;) {
    size_t available_out = 0;
    const bool ok = BrotliEncoderCompressStream(br, op, &available_in, &next_in, &available_out, nullptr, nullptr);
    TERN_CHECK_MSG(ok, "BrotliEncoderCompressStream failed");
    size_t size = 0;
    const uint8_t* produced = BrotliEncoderTakeOutput(br, &size);
    out->append(reinterpret_cast<const char*>(produced), size);
    const bool done = available_in == 0 && !BrotliEncoderHasMoreOutput(br) &&
                      (op != BROTLI_OPERATION_FINISH || BrotliEncoderIsFinished(br));
    if (done) return;
  }
}

}  // namespace

void Compressor::write(std::string_view data, std::string* out) {
  if (state_->coding == Coding::kGzip) return run_deflate(state_->zs, data, Z_SYNC_FLUSH, out);
  if (state_->coding == Coding::kBrotli) return run_brotli(state_->br, data, BROTLI_OPERATION_FLUSH, out);
  out->append(data);
}

void Compressor::finish(std::string* out) {
  if (state_->coding == Coding::kGzip) return run_deflate(state_->zs, {}, Z_FINISH, out);
  if (state_->coding == Coding::kBrotli) return run_brotli(state_->br, {}, BROTLI_OPERATION_FINISH, out);
}

std::string Compressor::compress(Coding coding, const CompressionPolicy& policy, std::string_view data) {
  Compressor compressor(coding, policy);
  std::string out;
  if (coding == Coding::kGzip) {
    run_deflate(compressor.state_->zs, data, Z_FINISH, &out);
  } else if (coding == Coding::kBrotli) {
    run_brotli(compressor.state_->br, data, BROTLI_OPERATION_FINISH, &out);
  } else {
    out.assign(data);
  }
  return out;
}

}  // namespace tern::http
