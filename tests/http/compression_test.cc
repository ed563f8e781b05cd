// Compression: which coding a request's Accept-Encoding gets, and coded
// streams that decode to what went in, piece by piece.
#include "http/compression.h"

#include <brotli/decode.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

namespace tern::http {
namespace {

std::string gunzip(std::string_view coded) {
  z_stream zs{};
  EXPECT_EQ(inflateInit2(&zs, 15 + 16), Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(coded.data()));
  zs.avail_in = static_cast<uInt>(coded.size());
  std::string out;
  char buffer[4096];
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buffer);
    zs.avail_out = sizeof buffer;
    rc = inflate(&zs, Z_SYNC_FLUSH);
    out.append(buffer, sizeof buffer - zs.avail_out);
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) break;  // all there is, decoded
  }
  inflateEnd(&zs);
  return out;
}

std::string unbrotli(std::string_view coded) {
  BrotliDecoderState* state = BrotliDecoderCreateInstance(nullptr, nullptr, nullptr);
  size_t available_in = coded.size();
  const uint8_t* next_in = reinterpret_cast<const uint8_t*>(coded.data());
  std::string out;
  BrotliDecoderResult rc = BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT;
  while (rc == BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT) {
    uint8_t buffer[4096];
    size_t available_out = sizeof buffer;
    uint8_t* next_out = buffer;
    rc = BrotliDecoderDecompressStream(state, &available_in, &next_in, &available_out, &next_out, nullptr);
    out.append(reinterpret_cast<char*>(buffer), sizeof buffer - available_out);
  }
  EXPECT_NE(rc, BROTLI_DECODER_RESULT_ERROR);
  BrotliDecoderDestroyInstance(state);
  return out;
}

std::string text(size_t size) {
  std::string s;
  while (s.size() < size) s += "tern serves the same words again and again, which compresses well. ";
  s.resize(size);
  return s;
}

TEST(Compression, AcceptEncodingChoosesByQValueBrotliFirstAtEqualQ) {
  CompressionPolicy policy;
  struct Row {
    const char* accept;
    Coding coding;
  } rows[] = {
      {"", Coding::kIdentity},
      {"gzip", Coding::kGzip},
      {"x-gzip", Coding::kGzip},
      {"GZIP", Coding::kGzip},
      {"br", Coding::kBrotli},
      {"gzip, deflate, br", Coding::kBrotli},
      {"gzip;q=1.0, br;q=0.5", Coding::kGzip},
      {"br;q=0, gzip", Coding::kGzip},
      {"br;q=0.000, gzip;q=0", Coding::kIdentity},
      {"*", Coding::kBrotli},
      {"*;q=0.5, br;q=0", Coding::kGzip},
      {"identity", Coding::kIdentity},
      {"deflate", Coding::kIdentity},
      {"gzip;q=bogus", Coding::kIdentity},
      {" gzip ; q=0.8 , br ; q=0.9 ", Coding::kBrotli},
  };
  for (const Row& row : rows) EXPECT_EQ(policy.choose(row.accept), row.coding) << row.accept;
  policy.brotli = false;
  EXPECT_EQ(policy.choose("br, gzip"), Coding::kGzip);
  EXPECT_EQ(policy.choose("br"), Coding::kIdentity);
}

TEST(Compression, TypesAreComparedWithoutParametersOrCase) {
  CompressionPolicy policy;
  EXPECT_TRUE(policy.compressible("text/html; charset=utf-8"));
  EXPECT_TRUE(policy.compressible("Application/JSON"));
  EXPECT_FALSE(policy.compressible("image/png"));
  EXPECT_FALSE(policy.compressible(""));
}

TEST(Compression, WholeBodiesRoundTrip) {
  CompressionPolicy policy;
  const std::string body = text(100000);
  const std::string gz = Compressor::compress(Coding::kGzip, policy, body);
  EXPECT_LT(gz.size(), body.size() / 10);
  EXPECT_EQ(gunzip(gz), body);
  const std::string br = Compressor::compress(Coding::kBrotli, policy, body);
  EXPECT_LT(br.size(), body.size() / 10);
  EXPECT_EQ(unbrotli(br), body);
}

TEST(Compression, EachPieceOfAStreamIsFlushedAndDecodable) {
  CompressionPolicy policy;
  for (Coding coding : {Coding::kGzip, Coding::kBrotli}) {
    Compressor compressor(coding, policy);
    std::string coded, plain;
    for (int i = 0; i < 5; ++i) {
      const std::string piece = "event " + std::to_string(i) + "\n";
      plain += piece;
      compressor.write(piece, &coded);
      // What was written so far decodes to everything given so far.
      EXPECT_EQ(coding == Coding::kGzip ? gunzip(coded) : unbrotli(coded), plain) << coding_name(coding);
    }
    compressor.finish(&coded);
    EXPECT_EQ(coding == Coding::kGzip ? gunzip(coded) : unbrotli(coded), plain);
  }
}

}  // namespace
}  // namespace tern::http
