// HttpServer with routes on a real socket: the library face of the HTTP
// engine (the tern executable is tested end to end by tests/integration/server).
#include "http/http_server.h"

#include <gtest/gtest.h>

#include <sys/socket.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>

#include "http1/http1_connection.h"
#include "support/loop_runner.h"
#include "support/raw_socket.h"
#include "support/temp_dir.h"

namespace tern::http {
namespace {

using tern::testing::LoopRunner;
using tern::testing::RawClient;

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerOptions options;
    options.limits.max_body_bytes = 1024;
    // Bodies above 64 bytes wait in a file in temp_ for their handler.
    options.limits.body_buffer_bytes = 64;
    options.limits.temp_dir = temp_.path();
    server_ = tern::testing::make_on_loop<HttpServer>(runner_, runner_.loop(),
                                                      net::InetAddress(0, true), options);
    runner_.run([&] {
      server_->get("/hello", [](const Request&, ResponseWriter& w) {
        w.start(200).header("Content-Type", "text/plain").body("hello");
      });
      server_->post("/echo", [](const Request& r, ResponseWriter& w) {
        w.start(200).header("Content-Type", "application/octet-stream").body(r.body());
      });
      server_->router().prefix(Method::kGet, "/files/", [](const Request& r, ResponseWriter& w) {
        w.start(200).body(r.path());
      });
      server_->post("/spooled", [this](const Request& r, ResponseWriter& w) {
        // How many files in temp_ this process holds open (the body's).
        int open = 0;
        for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
          std::error_code ec;
          auto target = std::filesystem::read_symlink(fd.path(), ec);
          if (!ec && target.string().starts_with(temp_.path())) ++open;
        }
        w.start(200).header("X-Temp-Files", static_cast<uint64_t>(open)).body(r.body());
      });
      server_->get("/large", [this](const Request&, ResponseWriter& w) {
        ++large_calls_;
        w.start(200).body(std::string(64 * 1024, 'k'));
      });
      server_->get("/unanswered", [](const Request&, ResponseWriter&) {});  // a handler bug
      server_->get("/half", [](const Request&, ResponseWriter& w) { w.start(200); });  // another
      server_->get("/stream", [](const Request&, ResponseWriter& w) {
        w.start(200).begin_stream();
        w.write("one,");
        w.write("two");
        w.end_stream();
      });
      ASSERT_TRUE(server_->start().ok());
    });
    port_ = server_->listen_address().port();
  }

  // Sends raw bytes and reads until the server closes (or the timeout).
  std::string exchange(const std::string& request) {
    RawClient client(port_);
    EXPECT_TRUE(client.send_all(request));
    return client.read_to_eof(nullptr, std::chrono::seconds(5));
  }

  tern::testing::TempDir temp_;
  LoopRunner runner_;
  tern::testing::LoopOwned<HttpServer> server_;
  uint16_t port_ = 0;
  std::atomic<int> large_calls_{0};
};

// Each idle keep-alive connection holds one beside its TcpConnection: 120
// bytes take a 128-byte allocation on a 64-bit glibc, 8 more a 144-byte
// one. What only a request in progress needs lives in its RequestState.
TEST(Http1ConnectionSize, FitsA128ByteAllocation) {
  if (sizeof(void*) != 8) GTEST_SKIP() << "sized for 64-bit targets";
  EXPECT_LE(sizeof(Http1Connection), 120u);
}

TEST_F(HttpServerTest, AHandlerThatDoesNotAnswerGets500AndOneThatStopsHalfwayACut) {
  std::string out = exchange("GET /unanswered HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(out.starts_with("HTTP/1.1 500 Internal Server Error\r\n")) << out;
  EXPECT_NE(out.find("Connection: close\r\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("hello"), std::string::npos) << out;  // closed after the 500
  // A head begun and never ended: nothing a client could take for a
  // response, and the connection closes.
  out = exchange("GET /half HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(out.find("\r\n\r\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("hello"), std::string::npos) << out;
}

TEST_F(HttpServerTest, ExactRouteAnswersAndHeadGetsNoBody) {
  std::string out = exchange(
      "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
      "HEAD /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  auto first = out.find("HTTP/1.1 200 OK\r\n");
  auto second = out.find("HTTP/1.1 200 OK\r\n", first + 1);
  ASSERT_NE(second, std::string::npos) << out;
  EXPECT_NE(out.find("Content-Length: 5\r\n\r\nhello"), std::string::npos);
  // The HEAD response ends right after its head.
  EXPECT_TRUE(out.ends_with("Connection: close\r\n\r\n")) << out;
}

TEST_F(HttpServerTest, ContentLengthBodyReachesTheHandler) {
  std::string out = exchange(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\nConnection: close\r\n\r\nhello world");
  EXPECT_TRUE(out.ends_with("\r\n\r\nhello world")) << out;
}

TEST_F(HttpServerTest, ChunkedBodyIsDecodedForTheHandler) {
  std::string out = exchange(
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
      "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\n");
  EXPECT_NE(out.find("Content-Length: 11\r\n"), std::string::npos) << out;
  EXPECT_TRUE(out.ends_with("\r\n\r\nhello world")) << out;
}

TEST_F(HttpServerTest, PipelinedRequestsWithBodiesAreAnsweredInOrder) {
  std::string out = exchange(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
      "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nxyz");
  auto a = out.find("\r\n\r\nabc");
  auto b = out.find("\r\n\r\nhello");
  auto c = out.find("\r\n\r\nxyz");
  ASSERT_TRUE(a != std::string::npos && b != std::string::npos && c != std::string::npos) << out;
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
}

TEST_F(HttpServerTest, BodyArrivingInPiecesIsAssembled) {
  RawClient client(port_);
  ASSERT_TRUE(client.send_all("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nConnection: close\r\n\r\n01234"));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(client.send_all("56789"));
  std::string out = client.read_to_eof(nullptr, std::chrono::seconds(5));
  EXPECT_TRUE(out.ends_with("\r\n\r\n0123456789")) << out;
}

TEST_F(HttpServerTest, ExpectContinueGetsAnInterimResponseBeforeTheBody) {
  RawClient client(port_);
  ASSERT_TRUE(client.send_all(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(client.read_exactly(25), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(client.send_all("body"));
  std::string out = client.read_to_eof(nullptr, std::chrono::seconds(5));
  EXPECT_TRUE(out.starts_with("HTTP/1.1 200 OK\r\n")) << out;
  EXPECT_TRUE(out.ends_with("\r\n\r\nbody")) << out;
}

TEST_F(HttpServerTest, BodyOverTheLimitIs413AndCloses) {
  std::string out = exchange("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n");
  EXPECT_TRUE(out.starts_with("HTTP/1.1 413 ")) << out;
  EXPECT_NE(out.find("Connection: close\r\n"), std::string::npos);
}

TEST_F(HttpServerTest, WrongMethodIs405WithAllowAndUnknownPathIs404) {
  std::string out = exchange(
      "DELETE /hello HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(out.starts_with("HTTP/1.1 405 ")) << out;
  EXPECT_NE(out.find("Allow: GET, HEAD\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("HTTP/1.1 404 "), std::string::npos) << out;
}

TEST_F(HttpServerTest, PrefixRouteMatchesTheLongestPrefix) {
  std::string out = exchange("GET /files/a/b.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(out.ends_with("\r\n\r\n/files/a/b.txt")) << out;
}

TEST_F(HttpServerTest, StreamedBodyIsChunkedFor11AndCloseDelimitedFor10) {
  std::string chunked = exchange("GET /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(chunked.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << chunked;
  EXPECT_TRUE(chunked.ends_with("\r\n\r\n4\r\none,\r\n3\r\ntwo\r\n0\r\n\r\n")) << chunked;
  std::string plain = exchange("GET /stream HTTP/1.0\r\n\r\n");
  EXPECT_EQ(plain.find("Transfer-Encoding"), std::string::npos) << plain;
  EXPECT_NE(plain.find("Connection: close\r\n"), std::string::npos) << plain;
  EXPECT_TRUE(plain.ends_with("\r\n\r\none,two")) << plain;
}

TEST_F(HttpServerTest, Http10KeepAliveIsAnnouncedAndKept) {
  RawClient client(port_);
  ASSERT_TRUE(client.send_all("GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  std::string first = client.read_exactly(200, std::chrono::milliseconds(500));
  EXPECT_NE(first.find("Connection: keep-alive\r\n"), std::string::npos) << first;
  ASSERT_TRUE(client.send_all("GET /hello HTTP/1.0\r\n\r\n"));
  std::string second = client.read_to_eof(nullptr, std::chrono::seconds(5));
  EXPECT_TRUE(second.starts_with("HTTP/1.1 200 OK\r\n")) << second;
}

TEST_F(HttpServerTest, LargeBodyWaitsInAnUnlinkedTempFile) {
  std::string body;
  for (int i = 0; i < 100; ++i) body += std::to_string(i) + ",";
  std::string out = exchange("POST /spooled HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " +
                             std::to_string(body.size()) + "\r\n\r\n" + body);
  EXPECT_NE(out.find("X-Temp-Files: 1\r\n"), std::string::npos) << out;
  EXPECT_TRUE(out.ends_with("\r\n\r\n" + body)) << out;
  // Gone with the request, and never named in the directory.
  EXPECT_TRUE(std::filesystem::is_empty(temp_.path()));
  std::string small = exchange(
      "POST /spooled HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 5\r\n\r\nsmall");
  EXPECT_NE(small.find("X-Temp-Files: 0\r\n"), std::string::npos) << small;
}

TEST_F(HttpServerTest, ChunkedBodyIsDecodedIntoTheTempFileWithoutItsFraming) {
  std::string chunks, body;
  for (int i = 0; i < 60; ++i) {
    std::string piece = "piece" + std::to_string(i) + ";";
    char size[16];
    std::snprintf(size, sizeof size, "%zx", piece.size());
    chunks += std::string(size) + ";n=\"" + std::string(20, 'e') + "\"\r\n" + piece + "\r\n";
    body += piece;
  }
  std::string out = exchange(
      "POST /spooled HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n" +
      chunks + "0\r\n\r\n");
  EXPECT_NE(out.find("X-Temp-Files: 1\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Content-Length: " + std::to_string(body.size()) + "\r\n"), std::string::npos);
  EXPECT_TRUE(out.ends_with("\r\n\r\n" + body)) << out;
}

TEST_F(HttpServerTest, PipelinedRequestsWaitWhileTheClientDoesNotRead) {
  // A client that pipelines a thousand requests for 64 KiB and reads
  // nothing gets only what the socket buffers hold (a few MiB) and what
  // the output high-water mark allows; the rest of its requests wait,
  // unparsed, and no 64 MB pile up in the server.
  RawClient client(port_);
  const std::string request = "GET /large HTTP/1.1\r\nHost: x\r\n\r\n";
  std::string all;
  for (int i = 0; i < 1000; ++i) all += request;
  ASSERT_TRUE(client.send_all(all));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const int answered = large_calls_.load();
  EXPECT_LT(answered, 300) << "responses kept being produced for a client that does not read";
  EXPECT_GT(answered, 0);
  // Reading, the client gets an answer to every request, in order.
  const std::string status_line = "HTTP/1.1 200 OK";
  size_t responses = 0, total = 0;
  std::string carry;  // shorter than the status line: nothing counted twice
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (responses < 1000 && std::chrono::steady_clock::now() < deadline) {
    std::string fresh = client.read_exactly(1 << 20, std::chrono::milliseconds(500));
    total += fresh.size();
    std::string got = carry + fresh;
    for (size_t at = got.find(status_line); at != std::string::npos; at = got.find(status_line, at + 1)) {
      ++responses;
    }
    carry = got.substr(got.size() - std::min(got.size(), status_line.size() - 1));
  }
  EXPECT_EQ(responses, 1000u) << large_calls_.load() << " answered, " << total << " bytes read";
}

// Asked to, each loop counts its connections by phase once a second; the
// server's timer goes with the server (here the loop outlives it: under
// ASan a tick left behind reads freed memory).
TEST_F(HttpServerTest, ConnectionPhasesAreCountedWhenAskedAndTheSamplerGoesWithTheServer) {
  runner_.run([&] { server_->count_connection_phases(true); });
  RawClient idle(port_);
  ASSERT_TRUE(idle.send_all("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_NE(idle.read_exactly(5 + 90, std::chrono::seconds(5)).find("200 OK"), std::string::npos);
  RawClient reading(port_);
  ASSERT_TRUE(reading.send_all("GET /hello HTTP/1.1\r\nHo"));
  HttpServer::ConnectionStates states;
  for (int i = 0; i < 50; ++i) {
    states = server_->connection_states();
    if (states.idle == 1 && states.reading == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(states.idle, 1u);
  EXPECT_EQ(states.reading, 1u);
  EXPECT_EQ(states.writing, 0u);
  server_.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));  // past the next tick
  EXPECT_EQ(runner_.run([] { return 1; }), 1);  // the loop is alive and well
}

}  // namespace
}  // namespace tern::http
