// The request parser's framing and safety rules: line endings, field
// syntax, Host, Content-Length and Transfer-Encoding (request smuggling),
// and the size limits.
#include "http1/request_parser.h"

#include <gtest/gtest.h>

#include <string>

#include "http1/request_parser_feeder.h"

namespace tern::http {
namespace {

using namespace test;  // NOLINT: the feeding helpers
using namespace std::string_literals;
using Limits = RequestParser::Limits;

TEST(RequestParser, RejectsBareLfAndBareCr) {
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\nHost: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\nHost: a\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\nHost: a\r\n\n", 400));
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\nHost: a\r\nX: b\rc\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\nHost: a\r\n\rX", 400));
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\rX", 400));
}

TEST(RequestParser, RejectsSpaceBeforeColon) {
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\nHost\t: a\r\n\r\n", 400));
}

TEST(RequestParser, RejectsMalformedFieldNames) {
  EXPECT_TRUE(fails_with(get_with("Ho\0st: a\r\n"s), 400));
  EXPECT_TRUE(fails_with(get_with(": a\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("X(y): a\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("NoColon\r\n"), 400));
}

TEST(RequestParser, RejectsControlBytesInValues) {
  EXPECT_TRUE(fails_with(get_with("X: a\0b\r\n"s), 400));
  EXPECT_TRUE(fails_with(get_with("X: a\x01" "b\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("X: a\x7f\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("X: 0123456789abcdef\x1b" "0123456789\r\n"), 400));
}

TEST(RequestParser, RejectsObsFold) {
  EXPECT_TRUE(fails_with(get_with("X: a\r\n b\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("X: a\r\n\tb\r\n"), 400));
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\n Host: a\r\n\r\n", 400));
}

TEST(RequestParser, RequiresExactlyOneHostIn11) {
  Parsed p;
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\nX: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with(get_with("Host: other\r\n"), 400));
  EXPECT_TRUE(fails_with("GET / HTTP/1.0\r\nHost: a\r\nhost: a\r\n\r\n", 400));
}

TEST(RequestParser, RejectsEmptyHost) {
  // RFC 9110 7.2 allows it only for a target without an authority, which an
  // origin server never serves (nginx answers 400 too).
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\nHost:\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\nHost: \t \r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET / HTTP/1.0\r\nHost:\r\n\r\n", 400));
}

TEST(RequestParser, ChecksHostSyntax) {
  Parsed p;
  for (const char* good : {"example.com:8080", "[::1]:80", "[2001:db8::1]", "10.0.0.1", "a%41b"}) {
    EXPECT_TRUE(parses("GET / HTTP/1.1\r\nHost: "s + good + "\r\n\r\n", &p)) << good;
  }
  for (const char* bad : {"a b", "a/b", "a@b", "[::1", "[]", "a:8x", ":80", "a:80:80", "%4"}) {
    EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\nHost: "s + bad + "\r\n\r\n", 400)) << bad;
  }
}

TEST(RequestParser, ParsesContentLength) {
  Parsed p;
  ASSERT_TRUE(parses(get_with("Content-Length: 42\r\n"), &p));
  EXPECT_EQ(p.framing, BodyFraming::kContentLength);
  EXPECT_EQ(p.content_length, 42u);
  ASSERT_TRUE(parses(get_with("Content-Length: 0\r\n"), &p));
  EXPECT_EQ(p.framing, BodyFraming::kContentLength);
  EXPECT_EQ(p.content_length, 0u);
  ASSERT_TRUE(parses(get_with("Content-Length: 18446744073709551615\r\n"), &p));
  EXPECT_EQ(p.content_length, 18446744073709551615u);
}

TEST(RequestParser, AcceptsRepeatedEqualContentLengths) {
  Parsed p;
  for (const char* fields : {"Content-Length: 5,5\r\n", "Content-Length: 5, 5\r\n",
                             "Content-Length:  5\r\n", "Content-Length: 5\r\ncontent-length: 5\r\n"}) {
    ASSERT_TRUE(parses(get_with(fields), &p)) << fields;
    EXPECT_EQ(p.content_length, 5u) << fields;
  }
}

TEST(RequestParser, RejectsMalformedContentLength) {
  for (const char* value : {"+5", "-1", "0x10", "5 5", "5, 6", "", "5,", ",5", "1e3", "５",
                            "18446744073709551616", "99999999999999999999999"}) {
    EXPECT_TRUE(fails_with(get_with("Content-Length: "s + value + "\r\n"), 400)) << value;
  }
  EXPECT_TRUE(fails_with(get_with("Content-Length: 5\r\nContent-Length: 6\r\n"), 400));
}

TEST(RequestParser, AcceptsChunkedTransferEncoding) {
  Parsed p;
  for (const char* fields : {"Transfer-Encoding: chunked\r\n", "transfer-encoding: Chunked\r\n",
                             "Transfer-Encoding: ,chunked\r\n"}) {
    ASSERT_TRUE(parses(get_with(fields), &p)) << fields;
    EXPECT_EQ(p.framing, BodyFraming::kChunked) << fields;
  }
}

TEST(RequestParser, RejectsContentLengthWithTransferEncoding) {
  EXPECT_TRUE(fails_with(get_with("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"), 400));
}

TEST(RequestParser, RejectsTransferEncodingNotEndingInChunked) {
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: chunked, gzip\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: identity\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: chunked, chunked\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: ,\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: chun ked\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: chunked;x=1\r\n"), 400));
}

TEST(RequestParser, AnswersUnknownTransferCodingWith501) {
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: gzip, chunked\r\n"), 501));
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: identity, chunked\r\n"), 501));
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"), 501));
}

TEST(RequestParser, RejectsTransferEncodingInHttp10) {
  EXPECT_TRUE(fails_with("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400));
}

TEST(RequestParser, NotesExpectContinueIn11Only) {
  Parsed p;
  ASSERT_TRUE(parses(get_with("Expect: 100-Continue\r\n"), &p));
  EXPECT_TRUE(p.expect_continue);
  ASSERT_TRUE(parses("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n", &p));
  EXPECT_FALSE(p.expect_continue);
}

TEST(RequestParser, EnforcesTargetLength) {
  Parsed p;
  const Limits limits{.max_target = 16};
  ASSERT_TRUE(parses("GET /" + std::string(15, 'a') + " HTTP/1.1\r\nHost: a\r\n\r\n", &p, limits));
  EXPECT_TRUE(fails_with("GET /" + std::string(16, 'a') + " HTTP/1.1\r\nHost: a\r\n\r\n", 414, limits));
  EXPECT_TRUE(fails_with("GET /" + std::string(16, 'a'), 414, limits));  // before it ends
  EXPECT_TRUE(fails_with("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n", 414));
}

TEST(RequestParser, EnforcesHeaderCount) {
  Parsed p;
  const Limits limits{.max_headers = 3};
  ASSERT_TRUE(parses(get_with("A: 1\r\nB: 2\r\n"), &p, limits));
  EXPECT_TRUE(fails_with(get_with("A: 1\r\nB: 2\r\nC: 3\r\n"), 431, limits));
  std::string many;
  for (size_t i = 0; i <= Request::kDefaultMaxHeaders; ++i) many += "X" + std::to_string(i) + ":v\r\n";
  EXPECT_TRUE(fails_with(get_with(many), 431));
}

TEST(RequestParser, AcceptsAHundredFieldsByDefault) {
  // What a browser behind a few proxies sends: bounded by the header
  // section's size in bytes, not by a small count.
  std::string fields;
  for (int i = 0; i < 120; ++i) fields += "X-Forwarded-Hop-" + std::to_string(i) + ": 203.0.113.7\r\n";
  Parsed p;
  ASSERT_TRUE(parses(get_with(fields), &p));
  ASSERT_EQ(p.headers.size(), 121u);  // Host too
  EXPECT_EQ(p.headers.back().first, "X-Forwarded-Hop-119");
}

TEST(RequestParser, ReusedRequestGrowsItsFieldTable) {
  // A Request object parsed first with a few fields and then with many (as
  // a pooled one is) sees every field of the second head, and then the
  // right count again for a short one.
  RequestParser parser;
  Request request;
  std::string few = get_with("A: 1\r\n");
  ASSERT_EQ(parser.parse(few, &request), ParseStatus::kComplete);
  EXPECT_EQ(request.headers().size(), 2u);
  std::string fields;
  for (int i = 0; i < 300; ++i) fields += "F" + std::to_string(i) + ": " + std::to_string(i) + "\r\n";
  std::string many = get_with(fields);
  parser.reset();
  ASSERT_EQ(parser.parse(many, &request), ParseStatus::kComplete);
  ASSERT_EQ(request.headers().size(), 301u);
  EXPECT_EQ(request.header("F299"), "299");
  parser.reset();
  ASSERT_EQ(parser.parse(few, &request), ParseStatus::kComplete);
  EXPECT_EQ(request.headers().size(), 2u);
  EXPECT_FALSE(request.has_header("F0"));
}

TEST(RequestParser, EnforcesHeadSize) {
  Parsed p;
  const std::string input = get_with("X: " + std::string(40, 'v') + "\r\n");
  ASSERT_TRUE(parses(input, &p, Limits{.max_head_bytes = input.size()}));
  EXPECT_TRUE(fails_with(input, 431, Limits{.max_head_bytes = input.size() - 1}));
  EXPECT_TRUE(fails_with(get_with("X: " + std::string(20000, 'v') + "\r\n"), 431));
  std::string empty_lines;
  for (int i = 0; i < 9000; ++i) empty_lines += "\r\n";
  EXPECT_TRUE(fails_with(empty_lines, 431));  // skipped lines count too
  EXPECT_TRUE(fails_with(std::string(20000, 'G'), 431));
}

}  // namespace
}  // namespace tern::http
