// ResponseWriter's responses as HTTP/1 bytes, written in memory: the
// test's code fills in a response through an Http1Output on a
// MemoryOutput, and the bytes it produced are read back, no socket.
#include "http/response_writer.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "http/status.h"
#include "http1/http1_output.h"
#include "net/buffer.h"
#include "support/memory_output.h"

namespace tern::http {
namespace {

// What the writer said about itself once the response was done.
struct Outcome {
  bool finished = false;
  bool keep_alive = false;
  bool stream_short = false;
  uint64_t body_bytes = 0;
};

// A response split at the end of its head.
struct Sent {
  std::string head;  // through the blank line
  std::string body;  // everything after it
  bool has(std::string_view field) const { return head.find(field) != std::string::npos; }
};

class ResponseWriterTest : public ::testing::Test {
 protected:
  // Writes one response with `fill` under `context` (its stream is set
  // here) to a request of `version`.
  Sent respond(const ResponseWriter::Context& context, std::function<void(ResponseWriter&)> fill,
               Outcome* outcome, Version version = Version::kHttp11) {
    testing::MemoryOutput memory;
    Http1Output http1;
    http1.begin(&memory, version);
    ResponseWriter::Context ctx = context;
    ctx.stream = &http1;
    ResponseWriter writer(ctx);
    fill(writer);
    *outcome = Outcome{writer.finished(), writer.keep_alive(), writer.stream_short(),
                       writer.body_bytes()};
    const std::string out = memory.take();
    Sent sent;
    size_t end = out.find("\r\n\r\n");
    EXPECT_NE(end, std::string::npos) << out;
    if (end == std::string::npos) return sent;
    sent.head = out.substr(0, end + 4);
    sent.body = out.substr(end + 4);
    return sent;
  }
  static ResponseWriter::Context http11() {
    ResponseWriter::Context ctx;
    ctx.date = "Sun, 06 Nov 1994 08:49:37 GMT";
    ctx.server = "tern";
    return ctx;
  }
  static ResponseWriter::Context head_request() {
    ResponseWriter::Context ctx = http11();
    ctx.head_only = true;
    return ctx;
  }

};

// Every status a handler or a config may answer has its RFC 9110 phrase
// (an error page titled "410 Unknown" was a bug).
TEST(ReasonPhrase, CoversTheStatusesOfRfc9110) {
  for (int status : {100, 101, 200, 201, 202, 203, 204, 205, 206, 300, 301, 302, 303, 304, 305, 307,
                     308, 400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414,
                     415, 416, 417, 421, 422, 426, 500, 501, 502, 503, 504, 505}) {
    EXPECT_NE(reason_phrase(status), "Unknown") << status;
  }
  EXPECT_EQ(reason_phrase(410), "Gone");
  EXPECT_EQ(reason_phrase(299), "Unknown");
}

TEST(ResponseWriterHeadStart, IsTheStatusLineThenServerThenDate) {
  net::Buffer b(0);
  Http1Output::append_start(b, 200, {}, "tern", "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(b.view(), "HTTP/1.1 200 OK\r\nServer: tern\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n");
  b.retrieve_all();
  Http1Output::append_start(b, 404, "Gone Fishing", "", "");
  EXPECT_EQ(b.view(), "HTTP/1.1 404 Gone Fishing\r\n");
}

TEST(BodyOwner, RefersToItsPointerAndSharesOnlyWhenAsked) {
  const auto file = std::make_shared<const std::string>("cached bytes");
  const BodyOwner owner(file);
  EXPECT_TRUE(owner);
  EXPECT_EQ(file.use_count(), 1) << "referred to, not shared";
  std::shared_ptr<const void> kept = owner.share();
  EXPECT_EQ(file.use_count(), 2);
  EXPECT_EQ(kept.get(), file.get());
  EXPECT_FALSE(BodyOwner());
  EXPECT_FALSE(BodyOwner(std::shared_ptr<int>()));
  EXPECT_EQ(BodyOwner().share(), nullptr);
}

TEST(FieldBlock, KeepsHttp1TextAndEachFieldsPlace) {
  FieldBlock block;
  EXPECT_TRUE(block.empty());
  block.add("Content-Type", "text/html");
  block.add("ETag", "\"x\"");
  FieldBlock more;
  more.add("X-Empty", "");
  block.append(more);
  EXPECT_EQ(block.text(), "Content-Type: text/html\r\nETag: \"x\"\r\nX-Empty: \r\n");
  ASSERT_EQ(block.size(), 3u);
  EXPECT_EQ(block.name(1), "ETag");
  EXPECT_EQ(block.value(1), "\"x\"");
  EXPECT_EQ(block.name(2), "X-Empty");
  EXPECT_EQ(block.value(2), "");
  FieldBlock copy = block;  // places are offsets: a copy reads its own text
  block.clear();
  EXPECT_EQ(copy.value(0), "text/html");
  EXPECT_TRUE(block.empty());
}

TEST_F(ResponseWriterTest, OkHeadIsCopiedForA200AndOnlyThere) {
  // A context whose cached head differs from what start() would build, so
  // the test sees which one went out.
  ResponseWriter::Context ctx = http11();
  ctx.ok_head = "HTTP/1.1 200 OK\r\nX-Cached: yes\r\n";
  Outcome o;
  Sent s = respond(ctx, [](ResponseWriter& w) { w.start(200).body("x"); }, &o);
  EXPECT_TRUE(s.head.starts_with("HTTP/1.1 200 OK\r\nX-Cached: yes\r\nContent-Length: 1\r\n"))
      << s.head;
  s = respond(ctx, [](ResponseWriter& w) { w.start(200, "Fine").body("x"); }, &o);
  EXPECT_TRUE(s.head.starts_with("HTTP/1.1 200 Fine\r\nServer: tern\r\nDate: ")) << s.head;
  s = respond(ctx, [](ResponseWriter& w) { w.start(404).body("x"); }, &o);
  EXPECT_TRUE(s.head.starts_with("HTTP/1.1 404 Not Found\r\nServer: tern\r\n")) << s.head;
  EXPECT_FALSE(s.has("X-Cached")) << s.head;
}

TEST_F(ResponseWriterTest, AKeptBodyIsCopiedOutOverHttp1AndItsOwnerLeftAlone) {
  auto file = std::make_shared<std::string>("the cached file");
  Outcome o;
  const Sent s = respond(http11(), [&](ResponseWriter& w) { w.start(200).body(*file, file); }, &o);
  EXPECT_TRUE(s.has("Content-Length: 15\r\n")) << s.head;
  EXPECT_EQ(s.body, "the cached file");
  EXPECT_EQ(file.use_count(), 1) << "HTTP/1 copies the bytes: it keeps no reference";
}

TEST_F(ResponseWriterTest, SizedStreamIsSentWithContentLengthAndNoChunking) {
  Outcome o;
  Sent s = respond(http11(), [](ResponseWriter& w) {
    w.start(200).header("Content-Type", "text/plain").begin_stream(10);
    w.write("hello");
    w.write("world");
    w.end_stream();
  }, &o);
  EXPECT_TRUE(s.head.starts_with("HTTP/1.1 200 OK\r\n")) << s.head;
  EXPECT_TRUE(s.has("\r\nContent-Length: 10\r\n")) << s.head;
  EXPECT_TRUE(s.has("\r\nContent-Type: text/plain\r\n")) << s.head;
  EXPECT_FALSE(s.has("Transfer-Encoding")) << s.head;
  EXPECT_FALSE(s.has("Connection:")) << s.head;
  EXPECT_EQ(s.body, "helloworld");
  EXPECT_TRUE(o.finished);
  EXPECT_TRUE(o.keep_alive);
  EXPECT_FALSE(o.stream_short);
  EXPECT_EQ(o.body_bytes, 10u);
}

TEST_F(ResponseWriterTest, SizedStreamDropsWhatGoesBeyondTheLength) {
  Outcome o;
  Sent s = respond(http11(), [](ResponseWriter& w) {
    w.start(200).begin_stream(5);
    w.write("hel");
    w.write("lo world");  // only "lo" fits
    w.write("more");
    w.end_stream();
  }, &o);
  EXPECT_TRUE(s.has("\r\nContent-Length: 5\r\n")) << s.head;
  EXPECT_EQ(s.body, "hello");
  EXPECT_FALSE(o.stream_short);
  EXPECT_EQ(o.body_bytes, 5u);
}

TEST_F(ResponseWriterTest, SizedStreamEndedEarlyIsShort) {
  Outcome o;
  Sent s = respond(http11(), [](ResponseWriter& w) {
    w.start(200).begin_stream(10);
    w.write("abc");
    w.end_stream();
  }, &o);
  EXPECT_TRUE(s.has("\r\nContent-Length: 10\r\n")) << s.head;
  EXPECT_EQ(s.body, "abc");
  EXPECT_TRUE(o.stream_short);
  EXPECT_EQ(o.body_bytes, 3u);
}

TEST_F(ResponseWriterTest, EmptySizedStreamIsNotShort) {
  Outcome o;
  Sent s = respond(http11(), [](ResponseWriter& w) {
    w.start(200).begin_stream(0);
    w.write("x");
    w.end_stream();
  }, &o);
  EXPECT_TRUE(s.has("\r\nContent-Length: 0\r\n")) << s.head;
  EXPECT_EQ(s.body, "");
  EXPECT_FALSE(o.stream_short);
  EXPECT_EQ(o.body_bytes, 0u);
}

TEST_F(ResponseWriterTest, HeadRequestGetsTheLengthOfASizedStreamButNoBody) {
  Outcome o;
  Sent s = respond(head_request(), [](ResponseWriter& w) {
    w.start(200).begin_stream(10);
    w.write("0123456789");
    w.end_stream();
  }, &o);
  EXPECT_TRUE(s.has("\r\nContent-Length: 10\r\n")) << s.head;
  EXPECT_FALSE(s.has("Transfer-Encoding")) << s.head;
  EXPECT_EQ(s.body, "");
  EXPECT_FALSE(o.stream_short) << "a HEAD response is complete without its body";
  EXPECT_TRUE(o.keep_alive);
  EXPECT_EQ(o.body_bytes, 0u);
}

TEST_F(ResponseWriterTest, HeadRequestToAChunkedStreamGetsNoBodyBytes) {
  Outcome o;
  Sent s = respond(head_request(), [](ResponseWriter& w) {
    w.start(200).begin_stream();
    w.write("abc");
    w.end_stream();
  }, &o);
  EXPECT_EQ(s.body, "") << "not even the last-chunk";
  EXPECT_FALSE(s.has("Content-Length")) << s.head;
  EXPECT_TRUE(o.keep_alive);
  EXPECT_EQ(o.body_bytes, 0u);
}

TEST_F(ResponseWriterTest, NoContentAndNotModifiedStreamsHaveNoBodyAndNoFraming) {
  for (int status : {204, 304}) {
    for (bool sized : {false, true}) {
      SCOPED_TRACE("status " + std::to_string(status) + (sized ? " begin_stream(3)" : " begin_stream()"));
      Outcome o;
      Sent s = respond(http11(), [&](ResponseWriter& w) {
        w.start(status);
        if (sized) {
          w.begin_stream(3);
        } else {
          w.begin_stream();
        }
        w.write("abc");
        w.end_stream();
      }, &o);
      EXPECT_TRUE(s.head.starts_with("HTTP/1.1 " + std::to_string(status) + " ")) << s.head;
      EXPECT_FALSE(s.has("Transfer-Encoding")) << s.head;
      EXPECT_FALSE(s.has("Content-Length")) << s.head;
      EXPECT_FALSE(s.has("Connection: close")) << s.head;
      EXPECT_EQ(s.body, "");
      EXPECT_TRUE(o.keep_alive);
      EXPECT_FALSE(o.stream_short);
      EXPECT_EQ(o.body_bytes, 0u);
    }
  }
}

TEST_F(ResponseWriterTest, ChunkedStreamFramesEachWriteAndSkipsEmptyOnes) {
  Outcome o;
  const std::string big(300, 'b');
  Sent s = respond(http11(), [&](ResponseWriter& w) {
    w.start(200).begin_stream();
    w.write("one");
    w.write("");  // must not end the stream early
    w.write(big);
    w.end_stream();
  }, &o);
  EXPECT_TRUE(s.has("\r\nTransfer-Encoding: chunked\r\n")) << s.head;
  EXPECT_FALSE(s.has("Content-Length")) << s.head;
  EXPECT_EQ(s.body, "3\r\none\r\n12c\r\n" + big + "\r\n0\r\n\r\n");
  EXPECT_TRUE(o.keep_alive);
  EXPECT_FALSE(o.stream_short);
  EXPECT_EQ(o.body_bytes, 303u);
}

TEST_F(ResponseWriterTest, Http10KeepsTheConnectionForASizedStreamOnly) {
  ResponseWriter::Context ctx = http11();
  Outcome o;
  Sent sized = respond(ctx, [](ResponseWriter& w) {
    w.start(200).begin_stream(3);
    w.write("abc");
    w.end_stream();
  }, &o, Version::kHttp10);
  EXPECT_TRUE(sized.has("\r\nContent-Length: 3\r\n")) << sized.head;
  EXPECT_TRUE(sized.has("\r\nConnection: keep-alive\r\n")) << sized.head;
  EXPECT_EQ(sized.body, "abc");
  EXPECT_TRUE(o.keep_alive);

  Sent unsized = respond(ctx, [](ResponseWriter& w) {
    w.start(200).begin_stream();
    w.write("abc");
    w.end_stream();
  }, &o, Version::kHttp10);
  // No chunked coding in 1.0: the end of the connection ends the body.
  EXPECT_FALSE(unsized.has("Transfer-Encoding")) << unsized.head;
  EXPECT_TRUE(unsized.has("\r\nConnection: close\r\n")) << unsized.head;
  EXPECT_EQ(unsized.body, "abc");
  EXPECT_FALSE(o.keep_alive);
}

TEST_F(ResponseWriterTest, CloseAfterIsAnnouncedOnASizedStream) {
  Outcome o;
  Sent s = respond(http11(), [](ResponseWriter& w) {
    w.close_after();
    w.start(200).begin_stream(2);
    w.write("ok");
    w.end_stream();
  }, &o);
  EXPECT_TRUE(s.has("\r\nConnection: close\r\n")) << s.head;
  EXPECT_EQ(s.body, "ok");
  EXPECT_FALSE(o.keep_alive);
}

}  // namespace
}  // namespace tern::http
