#include "http1/chunked_decoder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tern::http {
namespace {

using namespace std::string_literals;
using Limits = ChunkedDecoder::Limits;

struct Decoded {
  ChunkedDecoder::Status status = ChunkedDecoder::kNeedMore;
  std::string body;
  size_t consumed = 0;
  int error = 0;
  bool spans_inside_input = true;
};

// Decodes `input` as a connection would: the bytes arrive in pieces ending
// at each offset of `arrivals`, go into a pending buffer, and whatever the
// decoder consumes is erased from its front (so the data pointer moves).
Decoded decode(std::string_view input, const std::vector<size_t>& arrivals, Limits limits) {
  ChunkedDecoder decoder(limits);
  Decoded out;
  std::string pending;
  size_t fed = 0;
  for (size_t arrived : arrivals) {
    pending.append(input.substr(fed, arrived - fed));
    fed = arrived;
    for (;;) {
      size_t used = 0;
      std::string_view data;
      out.status = decoder.next(pending, &used, &data);
      if (out.status == ChunkedDecoder::kData) {
        out.spans_inside_input &= data.data() >= pending.data() &&
                                  data.data() + data.size() <= pending.data() + used;
        out.body.append(data);
      }
      out.consumed += used;
      pending.erase(0, used);
      if (out.status == ChunkedDecoder::kData) continue;
      if (out.status == ChunkedDecoder::kNeedMore) break;
      out.error = decoder.error_status();
      if (out.status == ChunkedDecoder::kDone && decoder.body_bytes() != out.body.size()) {
        out.error = -1;  // body_bytes() disagrees with what was handed out
      }
      return out;
    }
  }
  return out;
}

// Every way to deliver the input: whole, in two pieces split at every
// offset, and one byte at a time.
std::vector<std::vector<size_t>> deliveries(size_t size) {
  std::vector<std::vector<size_t>> all{{size}};
  for (size_t cut = 1; cut < size; ++cut) all.push_back({cut, size});
  std::vector<size_t> bytes;
  for (size_t n = 1; n <= size; ++n) bytes.push_back(n);
  all.push_back(bytes);
  return all;
}

std::string describe(const std::vector<size_t>& arrivals) {
  return arrivals.size() <= 2 ? "arrivals ending at " + std::to_string(arrivals.front())
                              : "byte by byte";
}

// The message must decode to `body` and end exactly `message_size` bytes in,
// however it arrives.
testing::AssertionResult decodes(std::string_view input, std::string_view body,
                                 size_t message_size, Limits limits = {}) {
  for (const auto& arrivals : deliveries(input.size())) {
    Decoded d = decode(input, arrivals, limits);
    if (d.status != ChunkedDecoder::kDone || d.body != body || d.consumed != message_size ||
        d.error != 0 || !d.spans_inside_input) {
      return testing::AssertionFailure()
             << describe(arrivals) << ": status " << static_cast<int>(d.status) << " error "
             << d.error << " consumed " << d.consumed << " body \"" << d.body << "\"";
    }
  }
  return testing::AssertionSuccess();
}

testing::AssertionResult decodes(std::string_view input, std::string_view body) {
  return decodes(input, body, input.size());
}

testing::AssertionResult fails_with(std::string_view input, int status, Limits limits = {}) {
  for (const auto& arrivals : deliveries(input.size())) {
    Decoded d = decode(input, arrivals, limits);
    if (d.status != ChunkedDecoder::kError || d.error != status) {
      return testing::AssertionFailure() << describe(arrivals) << ": status "
                                         << static_cast<int>(d.status) << " error " << d.error
                                         << ", want " << status;
    }
  }
  return testing::AssertionSuccess();
}

TEST(ChunkedDecoderHelpers, CatchWrongExpectations) {
  EXPECT_FALSE(decodes("5\r\nhello\r\n0\r\n\r\n", "hellO"));
  EXPECT_FALSE(decodes("5\r\nhello\r\n0\r\n\r\nX", "hello"));
  EXPECT_FALSE(fails_with("5\r\nhello\r\n0\r\n\r\n", 400));
}

TEST(ChunkedDecoder, DecodesChunks) {
  EXPECT_TRUE(decodes("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", "hello world"));
  EXPECT_TRUE(decodes("a\r\n0123456789\r\nA\r\nabcdefghij\r\n0\r\n\r\n",
                      "0123456789abcdefghij"));
  EXPECT_TRUE(decodes("0000000000000005\r\nhello\r\n0\r\n\r\n", "hello"));
}

TEST(ChunkedDecoder, PassesBinaryDataThrough) {
  EXPECT_TRUE(decodes("6\r\n\r\n\0\n\r\xff\r\n0\r\n\r\n"s, "\r\n\0\n\r\xff"s));
}

TEST(ChunkedDecoder, DecodesEmptyBody) { EXPECT_TRUE(decodes("0\r\n\r\n", "")); }

TEST(ChunkedDecoder, SkipsExtensions) {
  EXPECT_TRUE(decodes("5;name=value;flag\r\nhello\r\n0;last\r\n\r\n", "hello"));
  EXPECT_TRUE(decodes("5 ;a=\"x y\"\t; b\r\nhello\r\n0\r\n\r\n", "hello"));
  EXPECT_TRUE(decodes("5; a = b ;c= \"q\\\"\\\\;=\" ;d\r\nhello\r\n0\r\n\r\n", "hello"));
  EXPECT_TRUE(decodes("5;chunk-signature=ad9c1f4a8b\r\nhello\r\n0;x=\"\"\r\n\r\n", "hello"));
}

TEST(ChunkedDecoder, RejectsExtensionsOutsideTheGrammar) {
  for (std::string bad : {"5;", "5;\t", "5; ;a", "5;bad[=x", "5;a=", "5;a=b c", "5;=x", "5;a=\"open",
                          "5;a=\"x\"y", "5;a ", "5;a=b ", "5;a b", "5;a=(b)", "5;a=\"x\\"}) {
    EXPECT_TRUE(fails_with(bad + "\r\nhello\r\n0\r\n\r\n", 400)) << bad;
  }
}

TEST(ChunkedDecoder, BoundsFramingBytes) {
  // The body limit counts decoded bytes; framing has its own allowance, so
  // a client cannot send megabytes of extensions for a few bytes of body.
  const Limits limits{.max_framing = 40};
  EXPECT_TRUE(decodes("1;ab\r\nX\r\n1;ab\r\nY\r\n0\r\n\r\n", "XY", 23, limits));
  std::string flood;
  for (int i = 0; i < 4; ++i) flood += "1;" + std::string(12, 'e') + "\r\nX\r\n";
  EXPECT_TRUE(fails_with(flood + "0\r\n\r\n", 413, limits));
  // The default allowance grows with the body limit.
  EXPECT_EQ(ChunkedDecoder::framing_allowance(0), 64u * 1024);
  EXPECT_EQ(ChunkedDecoder::framing_allowance(8u << 20), 64u * 1024 + (1u << 20));
}

TEST(ChunkedDecoder, ReadsAndDropsTrailers) {
  EXPECT_TRUE(decodes("5\r\nhello\r\n0\r\nExpires: never\r\nX-Sum:\t1 \r\nX-E:\r\n\r\n", "hello"));
}

TEST(ChunkedDecoder, StopsAtEndOfMessage) {
  const std::string message = "5\r\nhello\r\n0\r\nX: y\r\n\r\n";
  EXPECT_TRUE(decodes(message + "GET / HTTP/1.1\r\n\r\n", "hello", message.size()));
  EXPECT_TRUE(decodes("0\r\n\r\n0\r\n\r\n", "", 5));
}

TEST(ChunkedDecoder, StaysDoneUntilReset) {
  ChunkedDecoder decoder;
  size_t used = 0;
  std::string_view data;
  ASSERT_EQ(decoder.next("0\r\n\r\n", &used, &data), ChunkedDecoder::kDone);
  EXPECT_EQ(decoder.next("3\r\nabc\r\n", &used, &data), ChunkedDecoder::kDone);
  EXPECT_EQ(used, 0u);
  decoder.reset();
  ASSERT_EQ(decoder.next("3\r\nabc\r\n", &used, &data), ChunkedDecoder::kData);
  EXPECT_EQ(data, "abc");
  EXPECT_EQ(decoder.body_bytes(), 3u);
}

TEST(ChunkedDecoder, EnforcesBodyLimit) {
  const Limits limits{.max_body = 10};
  EXPECT_TRUE(decodes("a\r\n0123456789\r\n0\r\n\r\n", "0123456789", 20, limits));
  EXPECT_TRUE(fails_with("b\r\n0123456789a\r\n0\r\n\r\n", 413, limits));
  EXPECT_TRUE(fails_with("6\r\n012345\r\n5\r\n01234\r\n0\r\n\r\n", 413, limits));
  EXPECT_TRUE(fails_with("ffffffffffffffff\r\n", 413));
}

TEST(ChunkedDecoder, RejectsBadChunkSize) {
  for (std::string bad : {"g\r\n", "\r\n", "-5\r\n", "0x5\r\n", "+5\r\n", " 5\r\n", "5 \r\n",
                          "5 x\r\n", "\xff\r\n"}) {
    EXPECT_TRUE(fails_with(bad + "hello\r\n0\r\n\r\n", 400)) << bad;
  }
}

TEST(ChunkedDecoder, RejectsMoreThan16SizeDigits) {
  EXPECT_TRUE(fails_with("00000000000000005\r\nhello\r\n0\r\n\r\n", 400));
}

TEST(ChunkedDecoder, RequiresCrlfAfterData) {
  EXPECT_TRUE(fails_with("5\r\nhelloX\r\n0\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("5\r\nhello\n0\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("5\r\nhello\rX0\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("3\r\nhello\r\n0\r\n\r\n", 400));
}

TEST(ChunkedDecoder, RejectsBareLfAndCrInFraming) {
  EXPECT_TRUE(fails_with("5\nhello\r\n0\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("5;ext\nhello\r\n0\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("5\rhello\r\n0\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("0\r\nX: y\n\r\n", 400));
  EXPECT_TRUE(fails_with("0\r\n\n", 400));
  EXPECT_TRUE(fails_with("0\r\n\rX", 400));
}

TEST(ChunkedDecoder, RejectsControlBytesInExtensions) {
  EXPECT_TRUE(fails_with("5;a\0\r\nhello\r\n0\r\n\r\n"s, 400));
  EXPECT_TRUE(fails_with("5;a\x01\r\nhello\r\n0\r\n\r\n", 400));
}

TEST(ChunkedDecoder, EnforcesSizeLineLength) {
  const Limits limits{.max_line = 16};
  EXPECT_TRUE(decodes("5;abcdefghij\r\nhello\r\n0\r\n\r\n", "hello", 26, limits));
  EXPECT_TRUE(fails_with("5;abcdefghijklmnopq\r\nhello\r\n0\r\n\r\n", 400, limits));
}

TEST(ChunkedDecoder, RejectsMalformedTrailers) {
  EXPECT_TRUE(fails_with("0\r\nX: a\r\n b\r\n\r\n", 400));  // obs-fold
  EXPECT_TRUE(fails_with("0\r\n: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("0\r\nX : a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("0\r\nNoColon\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("0\r\nX: a\0b\r\n\r\n"s, 400));
}

TEST(ChunkedDecoder, EnforcesTrailerSize) {
  const Limits limits{.max_trailer_bytes = 16};
  EXPECT_TRUE(decodes("0\r\nX: 012345678\r\n\r\n", "", 19, limits));
  EXPECT_TRUE(fails_with("0\r\nX: 0123456789\r\n\r\n", 431, limits));
  EXPECT_TRUE(fails_with("0\r\nX: " + std::string(9000, 'v') + "\r\n\r\n", 431));
}

}  // namespace
}  // namespace tern::http
