// ResponseParser: status lines, fields, framing, the errors that keep an
// upstream from splitting a response, and the same answer for a head that
// arrives whole or split at any byte.
#include "http1/response_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace tern::http {
namespace {

using Body = ResponseHead::Body;
using namespace std::string_literals;

struct Parsed {
  ParseStatus status = ParseStatus::kNeedMore;
  ResponseHead head;
  std::string reason;  // error reason
};

Parsed parse(std::string_view data, bool head_request = false, ResponseParser::Limits limits = {}) {
  Parsed out;
  ResponseParser parser(limits);
  out.status = parser.parse(data, head_request, &out.head);
  out.reason = std::string(parser.error_reason());
  return out;
}

// Parses `data` fed one growing prefix at a time, each in a fresh copy (so a
// parser that kept a pointer into an earlier one would read freed memory).
Parsed parse_split(std::string_view data, size_t step, bool head_request = false) {
  Parsed out;
  ResponseParser parser;
  for (size_t n = std::min(step, data.size());; n = std::min(n + step, data.size())) {
    const std::string copy(data.substr(0, n));
    out.status = parser.parse(copy, head_request, &out.head);
    if (out.status != ParseStatus::kNeedMore || n == data.size()) {
      out.reason = std::string(parser.error_reason());
      out.head.headers.clear();  // views into `copy`
      return out;
    }
  }
}

TEST(ResponseParserTest, AnOrdinaryResponseWithALength) {
  const std::string data = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello";
  const Parsed p = parse(data);
  ASSERT_EQ(p.status, ParseStatus::kComplete) << p.reason;
  EXPECT_EQ(p.head.status, 200);
  EXPECT_EQ(p.head.reason, "OK");
  EXPECT_EQ(p.head.version, Version::kHttp11);
  EXPECT_EQ(p.head.body, Body::kLength);
  EXPECT_EQ(p.head.content_length, 5u);
  EXPECT_TRUE(p.head.keep_alive);
  EXPECT_EQ(p.head.head_size, data.size() - 5);
  ASSERT_EQ(p.head.headers.size(), 2u);
  EXPECT_EQ(p.head.header("content-type"), "text/plain");
}

TEST(ResponseParserTest, FramingFollowsRfc9112) {
  struct Case {
    std::string head;
    bool head_request;
    Body body;
    bool keep_alive;
  };
  const Case cases[] = {
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false, Body::kChunked, true},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n", false, Body::kChunked, true},
      {"HTTP/1.1 200 OK\r\n\r\n", false, Body::kUntilClose, false},
      {"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n", false, Body::kLength, false},
      {"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false, Body::kLength, false},
      {"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n", false, Body::kLength, true},
      {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", true, Body::kNone, true},
      {"HTTP/1.1 204 No Content\r\n\r\n", false, Body::kNone, true},
      {"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n", false, Body::kNone, true},
      {"HTTP/1.1 100 Continue\r\n\r\n", false, Body::kNone, true},
      {"HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\n\r\n", false, Body::kLength, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.head);
    const Parsed p = parse(c.head, c.head_request);
    ASSERT_EQ(p.status, ParseStatus::kComplete) << p.reason;
    EXPECT_EQ(p.head.body, c.body);
    EXPECT_EQ(p.head.keep_alive, c.keep_alive);
  }
}

TEST(ResponseParserTest, StatusLinesWithoutAReasonAndInterimOnes) {
  Parsed p = parse("HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n");
  ASSERT_EQ(p.status, ParseStatus::kComplete) << p.reason;
  EXPECT_EQ(p.head.status, 404);
  EXPECT_EQ(p.head.reason, "");
  p = parse("HTTP/1.1 500 \r\nContent-Length: 0\r\n\r\n");
  ASSERT_EQ(p.status, ParseStatus::kComplete) << p.reason;
  EXPECT_EQ(p.head.reason, "");
  p = parse("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n");
  ASSERT_EQ(p.status, ParseStatus::kComplete);
  EXPECT_TRUE(p.head.interim());
  p = parse("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
  ASSERT_EQ(p.status, ParseStatus::kComplete);
  EXPECT_FALSE(p.head.interim());
  EXPECT_TRUE(p.head.upgrade);
}

TEST(ResponseParserTest, WhatCouldSplitAResponseIsAnError) {
  const std::string bad[] = {
      "HTTP/2 200 OK\r\n\r\n",
      "HTTP/1.1 20 OK\r\n\r\n",
      "HTTP/1.1 2000 OK\r\n\r\n",
      "HTTP/1.1 099 Low\r\n\r\n",
      "HTTP/1.1  200 OK\r\n\r\n",
      "HTTP/1.1 200 OK\nContent-Length: 1\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 1\n\r\n",
      "HTTP/1.1 200 O\rK\r\n\r\n",
      "HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n",
      "HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n"s,
      "HTTP/1.1 200 OK\r\nX : a\r\n\r\n",
      "HTTP/1.1 200 OK\r\n: a\r\n\r\n",
      "HTTP/1.1 200 OK\r\nNo colon\r\n\r\n",
      "HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
      "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
      "<html>hello</html>\r\n\r\n",
  };
  for (const std::string& data : bad) {
    SCOPED_TRACE(data);
    const Parsed p = parse(data);
    EXPECT_EQ(p.status, ParseStatus::kError);
    EXPECT_FALSE(p.reason.empty());
  }
}

TEST(ResponseParserTest, AnUpstreamSpeakingSomethingElseFailsOnItsFirstBytes) {
  EXPECT_EQ(parse("SSH-2.0").status, ParseStatus::kError);
  EXPECT_EQ(parse("HTTP/2").status, ParseStatus::kError);
  EXPECT_EQ(parse("HTT").status, ParseStatus::kNeedMore);
  // A bare LF ends the wait at once, before the size limit.
  EXPECT_EQ(parse("HTTP/1.1 200 OK\n").status, ParseStatus::kError);
}

TEST(ResponseParserTest, HeadsAreBoundedInBytesAndFields) {
  ResponseParser::Limits limits;
  limits.max_head_bytes = 256;
  limits.max_headers = 4;
  std::string endless = "HTTP/1.1 200 OK\r\nX: ";
  endless.append(300, 'a');
  EXPECT_EQ(parse(endless, false, limits).status, ParseStatus::kError);
  std::string many = "HTTP/1.1 200 OK\r\n";
  for (int i = 0; i < 5; ++i) many += "X" + std::to_string(i) + ": 1\r\n";
  EXPECT_EQ(parse(many + "\r\n", false, limits).status, ParseStatus::kError);
  std::string four = "HTTP/1.1 200 OK\r\n";
  for (int i = 0; i < 4; ++i) four += "X" + std::to_string(i) + ": 1\r\n";
  EXPECT_EQ(parse(four + "\r\n", false, limits).status, ParseStatus::kComplete);
}

TEST(ResponseParserTest, TheAnswerDoesNotDependOnWhereTheBytesAreCut) {
  const std::string samples[] = {
      "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 12\r\nSet-Cookie: a=b\r\n\r\nbody",
      "HTTP/1.1 302 Found\r\nLocation: /x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      "HTTP/1.0 200 OK\r\n\r\nuntil close",
      "HTTP/1.1 200 OK\r\nX: 1\r\n\nY: 2\r\n\r\n",
      "HTTP/1.1 200 OK\r\nX: 1\r\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
  };
  for (const std::string& data : samples) {
    const Parsed whole = parse_split(data, data.size());
    for (size_t step = 1; step < data.size(); ++step) {
      SCOPED_TRACE(data + " in steps of " + std::to_string(step));
      const Parsed split = parse_split(data, step);
      ASSERT_EQ(split.status, whole.status);
      EXPECT_EQ(split.reason, whole.reason);
      EXPECT_EQ(split.head.status, whole.head.status);
      EXPECT_EQ(split.head.body, whole.head.body);
      EXPECT_EQ(split.head.content_length, whole.head.content_length);
      EXPECT_EQ(split.head.head_size, whole.head.head_size);
    }
  }
}

}  // namespace
}  // namespace tern::http
