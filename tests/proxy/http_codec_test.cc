// HttpCodec reading responses as an upstream sends them: every framing,
// fed whole and split at every byte, gives the same head, body and ending;
// what cannot be relayed safely is an error.
#include "proxy/http_codec.h"

#include <gtest/gtest.h>

#include <string>

#include "http1/request_parser.h"
#include "net/buffer.h"
#include "net/inet_address.h"

namespace tern::proxy {
namespace {

struct Outcome {
  int status = 0;
  std::string fields;  // "Name: value\n" each
  std::string body;
  bool ended = false;
  bool failed = false;
  bool reusable = false;
  std::string error;
  size_t left = 0;  // bytes after the response
};

class CodecTest : public ::testing::Test {
 protected:
  void request(const std::string& raw) {
    raw_ = raw;
    parser_.reset();
    request_ = http::Request();
    ASSERT_EQ(parser_.parse(raw_, &request_), http::ParseStatus::kComplete);
  }

  // Feeds `response` in pieces of `step` bytes (0: whole), as reads would.
  Outcome read(const std::string& response, size_t step, bool close_at_end = false,
               http::ResponseParser::Limits limits = {}) {
    ForwardOptions options;
    options.target = request_.target();
    HttpCodec codec(request_, options, limits);
    codec.reset();
    net::Buffer input;
    Outcome out;
    size_t at = 0;
    while (!out.ended && !out.failed) {
      const size_t n = step == 0 ? response.size() - at : std::min(step, response.size() - at);
      if (n == 0) {
        if (close_at_end && codec.ends_at_close()) out.ended = true;
        break;
      }
      input.append(response.data() + at, n);
      at += n;
      for (;;) {
        const upstream::Codec::Event event = codec.next(input);
        if (event.kind == upstream::Codec::Event::kNeedMore) break;
        if (event.kind == upstream::Codec::Event::kHead) {
          out.status = codec.head().status;
          for (const http::Header& h : codec.head().headers) {
            out.fields += std::string(h.name) + ": " + std::string(h.value) + "\n";
          }
        } else if (event.kind == upstream::Codec::Event::kBody) {
          out.body += event.data;
        } else if (event.kind == upstream::Codec::Event::kEnd) {
          out.ended = true;
          out.reusable = codec.reusable();
          break;
        } else {
          out.failed = true;
          out.error = codec.error();
          break;
        }
      }
    }
    out.left = input.readable_bytes() + (response.size() - at);
    return out;
  }

  // The same outcome whole and split at every byte.
  Outcome read_every_way(const std::string& response, bool close_at_end = false) {
    const Outcome whole = read(response, 0, close_at_end);
    for (size_t step : {1, 2, 3, 7}) {
      const Outcome split = read(response, step, close_at_end);
      EXPECT_EQ(split.status, whole.status) << "step " << step;
      EXPECT_EQ(split.body, whole.body) << "step " << step;
      EXPECT_EQ(split.ended, whole.ended) << "step " << step;
      EXPECT_EQ(split.failed, whole.failed) << "step " << step;
      EXPECT_EQ(split.reusable, whole.reusable) << "step " << step;
    }
    return whole;
  }

  std::string raw_;
  http::RequestParser parser_;
  http::Request request_;
};

TEST_F(CodecTest, ALengthEndsTheBodyAndTheConnectionIsReusable) {
  request("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  Outcome out = read_every_way("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhello");
  EXPECT_EQ(out.status, 200);
  EXPECT_EQ(out.body, "hello");
  EXPECT_TRUE(out.ended);
  EXPECT_TRUE(out.reusable);
  EXPECT_NE(out.fields.find("X-A: 1\n"), std::string::npos);
}

TEST_F(CodecTest, AChunkedBodyIsDecoded) {
  request("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  Outcome out = read_every_way(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n"
      "0\r\nTrailer-Field: x\r\n\r\n");
  EXPECT_EQ(out.body, "hello world");
  EXPECT_TRUE(out.ended);
  EXPECT_TRUE(out.reusable);
  EXPECT_EQ(out.left, 0u);
}

TEST_F(CodecTest, InterimResponsesAreDroppedAndTheFinalOneRead) {
  request("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n");
  Outcome out = read_every_way(
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n"
      "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok");
  EXPECT_EQ(out.status, 201);
  EXPECT_EQ(out.body, "ok");
  EXPECT_EQ(out.fields.find("Link"), std::string::npos);
}

TEST_F(CodecTest, ABodyUntilTheCloseEndsThereAndIsNotReusable) {
  request("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  Outcome out = read_every_way("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it", true);
  EXPECT_EQ(out.body, "all of it");
  EXPECT_TRUE(out.ended);
  EXPECT_FALSE(out.reusable);
}

TEST_F(CodecTest, HeadAnd304AndConnectionCloseFrameAsTheySay) {
  request("HEAD /a HTTP/1.1\r\nHost: x\r\n\r\n");
  Outcome head = read_every_way("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
  EXPECT_TRUE(head.ended);
  EXPECT_TRUE(head.body.empty());
  EXPECT_TRUE(head.reusable);
  request("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  Outcome not_modified = read_every_way("HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n");
  EXPECT_TRUE(not_modified.ended);
  EXPECT_TRUE(not_modified.reusable);
  Outcome closing = read_every_way("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok");
  EXPECT_TRUE(closing.ended);
  EXPECT_FALSE(closing.reusable);
}

TEST_F(CodecTest, BytesAfterTheResponseAreLeftForTheCallerToRefuse) {
  request("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  // A second response the client never asked for (response smuggling):
  // the Call sees input left and does not reuse the connection.
  Outcome out = read("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n\r\n", 0);
  EXPECT_TRUE(out.ended);
  EXPECT_EQ(out.body, "ok");
  EXPECT_GT(out.left, 0u);
}

TEST_F(CodecTest, WhatCannotBeRelayedSafelyIsAnError) {
  request("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  for (const char* bad : {
           "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",   // two lengths
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n",
           "HTTP/1.1 200 OK\r\nX-A: 1\nX-B: 2\r\n\r\n",                               // bare LF
           "HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n",                                    // bare CR
           "HTTP/2 200\r\n\r\n",
           "ICY 200 OK\r\n\r\n",
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",              // not hex
           "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",          // unasked
       }) {
    Outcome out = read_every_way(bad);
    EXPECT_TRUE(out.failed) << bad;
    EXPECT_FALSE(out.error.empty()) << bad;
  }
}

TEST_F(CodecTest, AHeadIsBoundedByItsBytesAndTheLimitsGiven) {
  request("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  // An application that sets many cookies: 300 fields in 5 KiB are fine.
  std::string many = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n";
  for (int i = 0; i < 300; ++i) many += "Set-Cookie: c" + std::to_string(i) + "=1\r\n";
  many += "\r\nok";
  const Outcome ok = read_every_way(many);
  EXPECT_TRUE(ok.ended) << ok.error;
  EXPECT_EQ(ok.body, "ok");
  // The location's settings bound it.
  const Outcome fields = read(many, 0, false, {32 * 1024, 100});
  EXPECT_TRUE(fields.failed);
  EXPECT_EQ(fields.error.find("too many fields") != std::string::npos, true) << fields.error;
  const Outcome bytes = read(many, 0, false, {2048, 1000});
  EXPECT_TRUE(bytes.failed);
}

TEST_F(CodecTest, ProxyFieldsAreForThisHopOnly) {
  request("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  ForwardOptions options;
  options.target = request_.target();
  HttpCodec codec(request_, options);
  for (const char* name : {"Proxy-Authenticate", "proxy-authenticate", "Proxy-Connection", "Proxy-Status2", "TE"}) {
    EXPECT_TRUE(codec.hop_field(name)) << name;
  }
  for (const char* name : {"Proxy", "X-Proxy-Id", "Content-Type", "Set-Cookie"}) {
    EXPECT_FALSE(codec.hop_field(name)) << name;
  }
}

TEST_F(CodecTest, TheRequestGoesWithItsLength) {
  request("POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  ForwardOptions options;
  options.target = "/v1/up";
  HttpCodec codec(request_, options);
  net::Buffer out;
  codec.write_head(out, 11);  // a chunked body gathered first
  codec.write_body(out, "hello world", true);
  const std::string sent(out.view());
  EXPECT_TRUE(sent.starts_with("POST /v1/up HTTP/1.1\r\nHost: x\r\n")) << sent;
  EXPECT_NE(sent.find("\r\nContent-Length: 11\r\n"), std::string::npos) << sent;
  EXPECT_EQ(sent.find("chunked"), std::string::npos) << sent;
  EXPECT_TRUE(sent.ends_with("\r\n\r\nhello world")) << sent;
}

}  // namespace
}  // namespace tern::proxy
