// Exchanges on a real HttpServer: handlers that answer after returning, take
// the body as it streams, pause it, wait for a slow client, or give up. The
// clients are raw sockets; the server runs on a LoopRunner, and everything
// the handlers record lives on its loop and is read through LoopRunner::run.
#include "http/exchange.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "http/http_server.h"
#include "net/event_loop.h"
#include "support/loop_runner.h"
#include "support/raw_socket.h"

namespace tern::http {
namespace {

using namespace std::chrono_literals;
using tern::testing::LoopRunner;
using tern::testing::RawClient;
using Clock = std::chrono::steady_clock;

std::string pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed;
  for (char& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>('a' + (x >> 24) % 26);
  }
  return s;
}

size_t count(std::string_view haystack, std::string_view needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string_view::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// Reads until `end` has arrived (returning everything read), the peer
// closes, or 5 s pass.
std::string read_until(RawClient& client, std::string_view end) {
  std::string out;
  auto deadline = Clock::now() + 5s;
  while (out.find(end) == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{client.fd(), POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) != 1) break;
    char buf[65536];
    ssize_t n = ::recv(client.fd(), buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Reads until the server closes the connection, by FIN or by reset; *closed
// says whether it did within `timeout`.
std::string read_until_closed(RawClient& client, bool* closed,
                              std::chrono::milliseconds timeout = 5s) {
  std::string out;
  *closed = false;
  auto deadline = Clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{client.fd(), POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) != 1) return out;
    char buf[65536];
    ssize_t n = ::recv(client.fd(), buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (n < 0 && errno == ECONNRESET)) {
      *closed = true;
      return out;
    }
    if (n < 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

// What a streaming body handler saw.
struct BodyLog {
  std::string body;
  int pieces = 0;
  int lasts = 0;
  bool piece_after_last = false;
  bool empty_piece_before_last = false;
  void add(std::string_view piece, bool last) {
    if (lasts > 0) piece_after_last = true;
    if (piece.empty() && !last) empty_piece_before_last = true;
    body.append(piece);
    ++pieces;
    if (last) ++lasts;
  }
};

class ExchangeTest : public ::testing::Test {
 protected:
  // After the Router in the server's chain: takes the paths on() named as
  // exchanges, and counts the heads it is asked about.
  class PathHandler final : public RequestHandler {
   public:
    explicit PathHandler(ExchangeTest* test) : test_(test) {}
    Claim claim(Route& route) override {
      ++test_->handler_claims_;
      return test_->handlers_.contains(std::string(route.path)) ? Claim::kExchange : Claim::kPass;
    }
    void start(const Route& route, Exchange& exchange) override {
      test_->handlers_.at(std::string(route.path))(exchange);
    }

   private:
    ExchangeTest* test_;
  };

  // Takes requests for `path` as exchanges (before start()).
  void on(const std::string& path, ExchangeHandler handler) { handlers_[path] = std::move(handler); }

  void start() {
    HttpServerOptions options;
    server_ = tern::testing::make_on_loop<HttpServer>(runner_, runner_.loop(),
                                                      net::InetAddress(0, true), options);
    runner_.run([&] {
      server_->get("/hello", [](const Request&, ResponseWriter& w) { w.start(200).body("hello"); });
      server_->post("/echo", [](const Request& r, ResponseWriter& w) { w.start(200).body(r.body()); });
      server_->add_handler(std::make_unique<PathHandler>(this));
      ASSERT_TRUE(server_->start().ok());
    });
    port_ = server_->listen_address().port();
  }

  template <typename F>
  auto on_loop(F f) {
    return runner_.run(f);
  }
  // Polls `ready` on the server's loop for up to 5 s.
  template <typename F>
  bool eventually(F ready) {
    auto deadline = Clock::now() + 5s;
    while (Clock::now() < deadline) {
      if (runner_.run(ready)) return true;
      std::this_thread::sleep_for(2ms);
    }
    return runner_.run(ready);
  }

  LoopRunner runner_;
  std::map<std::string, ExchangeHandler> handlers_;  // outlives the server
  // Loop thread only:
  int handler_claims_ = 0;
  int started_ = 0;
  int aborts_ = 0;
  BodyLog body_;
  tern::testing::LoopOwned<HttpServer> server_;
  uint16_t port_ = 0;
};

TEST_F(ExchangeTest, AnsweredLaterFromATimerWithAChunkedStream) {
  on("/later", [this](Exchange& ex) {
    ++started_;
    ex.loop()->run_after(20ms, [&ex] {
      EXPECT_EQ(ex.request().path(), "/later");
      EXPECT_EQ(ex.request().header("X-Tag"), "t1");
      ex.writer().start(200).header("Content-Type", "text/plain").begin_stream();
      ex.writer().write("hello ");
      ex.flush();
      ex.writer().write("world");
      ex.writer().end_stream();
      ex.finish();
    });
  });
  start();
  RawClient client(port_);
  auto sent = Clock::now();
  ASSERT_TRUE(client.send_all("GET /later HTTP/1.1\r\nHost: x\r\nX-Tag: t1\r\n\r\n"));
  std::string out = read_until(client, "0\r\n\r\n");
  EXPECT_GE(Clock::now() - sent, 15ms) << "answered before the timer";
  EXPECT_TRUE(out.starts_with("HTTP/1.1 200 OK\r\n")) << out;
  EXPECT_NE(out.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("Content-Length"), std::string::npos) << out;
  EXPECT_EQ(out.find("Connection: close"), std::string::npos) << out;
  EXPECT_TRUE(out.ends_with("\r\n\r\n6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n")) << out;

  // The connection goes on to the next request.
  ASSERT_TRUE(client.send_all("GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  std::string next = client.read_to_eof(nullptr, 5s);
  EXPECT_TRUE(next.starts_with("HTTP/1.1 200 OK\r\n")) << next;
  EXPECT_TRUE(next.ends_with("\r\n\r\nhello")) << next;
  EXPECT_EQ(on_loop([&] { return started_; }), 1);
}

TEST_F(ExchangeTest, AnsweredLaterWithAStreamOfKnownLength) {
  on("/sized", [](Exchange& ex) {
    ex.loop()->run_after(10ms, [&ex] {
      ex.writer().start(200).begin_stream(11);
      ex.writer().write("hello");
      ex.flush();
      ex.writer().write(" world");
      ex.writer().end_stream();
      ex.finish();
    });
  });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all("GET /sized HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string out = read_until(client, "hello world");
  EXPECT_NE(out.find("Content-Length: 11\r\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("Transfer-Encoding"), std::string::npos) << out;
  EXPECT_EQ(out.find("Connection: close"), std::string::npos) << out;
  EXPECT_TRUE(out.ends_with("\r\n\r\nhello world")) << out;
  ASSERT_TRUE(client.send_all("GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  std::string next = client.read_to_eof(nullptr, 5s);
  EXPECT_TRUE(next.starts_with("HTTP/1.1 200 OK\r\n")) << "extra bytes after the sized body: " << next;
  EXPECT_TRUE(next.ends_with("\r\n\r\nhello")) << next;
}

TEST_F(ExchangeTest, HeadRequestToAStreamGetsTheHeadOnly) {
  on("/sized", [](Exchange& ex) {
    ex.writer().start(200).begin_stream(5);
    ex.writer().write("hello");
    ex.writer().end_stream();
    ex.finish();
  });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all(
      "HEAD /sized HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  std::string out = client.read_to_eof(nullptr, 5s);
  EXPECT_EQ(count(out, "HTTP/1.1 200 OK\r\n"), 2u) << out;
  EXPECT_NE(out.find("Content-Length: 5\r\n"), std::string::npos) << out;
  // The second response starts right after the first head: no body between.
  EXPECT_NE(out.find("\r\n\r\nHTTP/1.1 200 OK\r\n"), std::string::npos) << out;
  EXPECT_EQ(count(out, "hello"), 1u) << out;
}

TEST_F(ExchangeTest, AnsweredInsideTheHandlerKeepsTheConnectionAlive) {
  on("/sync", [this](Exchange& ex) {
    ++started_;
    ex.set_body_handler([this](std::string_view piece, bool last) { body_.add(piece, last); });
    ex.writer().start(200).body("sync-" + std::to_string(started_));
    ex.finish();
  });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all("GET /sync HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string first = read_until(client, "sync-1");
  EXPECT_TRUE(first.starts_with("HTTP/1.1 200 OK\r\n")) << first;
  EXPECT_EQ(first.find("Connection: close"), std::string::npos) << first;
  // Then two pipelined in one write, the last one closing.
  ASSERT_TRUE(client.send_all(
      "GET /sync HTTP/1.1\r\nHost: x\r\n\r\nGET /sync HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  bool closed = false;
  std::string rest = read_until_closed(client, &closed);
  EXPECT_TRUE(closed);
  auto two = rest.find("sync-2");
  auto three = rest.find("sync-3");
  ASSERT_NE(two, std::string::npos) << rest;
  ASSERT_NE(three, std::string::npos) << rest;
  EXPECT_LT(two, three);
  EXPECT_EQ(count(rest, "HTTP/1.1 200 OK"), 2u) << rest;
  EXPECT_EQ(on_loop([&] { return body_.pieces; }), 0) << "a request without a body got body calls";
}

TEST_F(ExchangeTest, PipelinedRequestsWaitForAPendingExchange) {
  on("/later", [this](Exchange& ex) {
    int n = ++started_;
    ex.loop()->run_after(30ms, [&ex, n] {
      ex.writer().start(200).body("later-" + std::to_string(n));
      ex.finish();
    });
  });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all(
      "GET /later HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\necho"
      "GET /later HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  bool closed = false;
  std::string out = read_until_closed(client, &closed);
  EXPECT_TRUE(closed);
  auto a = out.find("\r\n\r\nlater-1");
  auto b = out.find("\r\n\r\nhello");
  auto c = out.find("\r\n\r\necho");
  auto d = out.find("\r\n\r\nlater-2");
  ASSERT_TRUE(a != std::string::npos && b != std::string::npos && c != std::string::npos &&
              d != std::string::npos)
      << out;
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  EXPECT_LT(c, d);
  EXPECT_EQ(count(out, "HTTP/1.1 "), 4u) << out;
}

TEST_F(ExchangeTest, ContentLengthBodyStreamsToTheHandlerInOrder) {
  on("/upload", [this](Exchange& ex) {
    ++started_;
    ex.set_body_handler([this, &ex](std::string_view piece, bool last) {
      body_.add(piece, last);
      if (!last) return;
      EXPECT_TRUE(ex.body_complete());
      // The head is still readable after the body streamed past it.
      ex.writer().start(200).body(std::string(ex.request().header("X-Tag")) + " " +
                                  std::to_string(body_.body.size()));
      ex.finish();
    });
    EXPECT_FALSE(ex.body_complete());
  });
  start();
  const std::string body = pattern(300000, 7);
  RawClient client(port_);
  ASSERT_TRUE(client.send_all("POST /upload HTTP/1.1\r\nHost: x\r\nX-Tag: up\r\nContent-Length: 300000\r\n\r\n" +
                              body.substr(0, 1000)));
  // The first bytes reach the handler before the rest is even sent.
  ASSERT_TRUE(eventually([&] { return body_.body.size() == 1000; }));
  ASSERT_TRUE(client.send_all(body.substr(1000, 150000)));
  ASSERT_TRUE(client.send_all(body.substr(151000) + "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  bool closed = false;
  std::string out = read_until_closed(client, &closed);
  EXPECT_TRUE(closed);
  auto first = out.find("\r\n\r\nup 300000");
  auto second = out.find("\r\n\r\nhello");
  ASSERT_NE(first, std::string::npos) << out;
  ASSERT_NE(second, std::string::npos) << "the request after the body was lost: " << out;
  EXPECT_LT(first, second);
  on_loop([&] {
    EXPECT_TRUE(body_.body == body) << "body bytes lost or reordered (" << body_.body.size() << " bytes)";
    EXPECT_GE(body_.pieces, 2);
    EXPECT_EQ(body_.lasts, 1);
    EXPECT_FALSE(body_.piece_after_last);
    EXPECT_FALSE(body_.empty_piece_before_last);
    EXPECT_EQ(started_, 1);
  });
}

TEST_F(ExchangeTest, ChunkedBodyIsDecodedAndStreamedToTheHandler) {
  on("/upload", [this](Exchange& ex) {
    ex.set_body_handler([this, &ex](std::string_view piece, bool last) {
      body_.add(piece, last);
      if (!last) return;
      ex.writer().start(200).body("got " + body_.body);
      ex.finish();
    });
  });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all(
      "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"));
  ASSERT_TRUE(eventually([&] { return body_.body == "hel"; })) << "the chunk was held back";
  ASSERT_TRUE(client.send_all("lo\r\n6;ext=1\r\n world\r\n"));
  ASSERT_TRUE(eventually([&] { return body_.body == "hello world"; }));
  EXPECT_EQ(on_loop([&] { return body_.lasts; }), 0);
  ASSERT_TRUE(client.send_all("0\r\nTrailer: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  bool closed = false;
  std::string out = read_until_closed(client, &closed);
  EXPECT_TRUE(closed);
  auto first = out.find("\r\n\r\ngot hello world");
  auto second = out.find("\r\n\r\nhello");
  ASSERT_NE(first, std::string::npos) << out;
  ASSERT_NE(second, std::string::npos) << out;
  EXPECT_LT(first, second);
  on_loop([&] {
    EXPECT_EQ(body_.lasts, 1);
    EXPECT_FALSE(body_.piece_after_last);
    EXPECT_FALSE(body_.empty_piece_before_last);
  });
}

TEST_F(ExchangeTest, PausedBodyResumesFromATimerWithNothingLost) {
  struct State {
    bool paused = false;
    int delivered_while_paused = 0;
    int resumes = 0;
  };
  State state;  // loop thread only
  on("/upload", [this, &state](Exchange& ex) {
    ex.set_body_handler([this, &state, &ex](std::string_view piece, bool last) {
      if (state.paused) ++state.delivered_while_paused;
      body_.add(piece, last);
      if (last) {
        ex.writer().start(200).body(std::to_string(body_.body.size()));
        return ex.finish();
      }
      if (body_.pieces == 1) {
        ex.pause_body();
        state.paused = true;
        ex.loop()->run_after(60ms, [&state, &ex] {
          state.paused = false;
          ++state.resumes;
          ex.resume_body();
        });
      }
    });
  });
  start();
  const std::string body = pattern(200000, 3);
  RawClient client(port_);
  ASSERT_TRUE(client.send_all("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\nConnection: close\r\n\r\n" +
                              body.substr(0, 500)));
  ASSERT_TRUE(eventually([&] { return body_.pieces == 1; }));
  ASSERT_TRUE(client.send_all(body.substr(500)));
  std::this_thread::sleep_for(30ms);
  // Paused: the rest waits in the kernel.
  EXPECT_EQ(on_loop([&] { return body_.body.size(); }), 500u);
  bool closed = false;
  std::string out = read_until_closed(client, &closed);
  EXPECT_TRUE(out.ends_with("\r\n\r\n200000")) << out;
  on_loop([&] {
    EXPECT_EQ(state.delivered_while_paused, 0);
    EXPECT_EQ(state.resumes, 1);
    EXPECT_TRUE(body_.body == body);
    EXPECT_EQ(body_.lasts, 1);
  });
}

TEST_F(ExchangeTest, PausedChunkedBodyResumesWithChunksAlreadyBuffered) {
  struct State {
    bool paused = false;
    int delivered_while_paused = 0;
    int pauses = 0;
  };
  State state;  // loop thread only
  on("/upload", [this, &state](Exchange& ex) {
    ex.set_body_handler([this, &state, &ex](std::string_view piece, bool last) {
      if (state.paused) ++state.delivered_while_paused;
      body_.add(piece, last);
      if (last) {
        ex.writer().start(200).body("got " + body_.body);
        return ex.finish();
      }
      // Pause after every chunk; the rest is already in the input buffer.
      ex.pause_body();
      state.paused = true;
      ++state.pauses;
      ex.loop()->run_after(5ms, [&state, &ex] {
        state.paused = false;
        ex.resume_body();
      });
    });
  });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all(
      "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\none\r\n3\r\ntwo\r\n5\r\nthree\r\n4\r\nfour\r\n0\r\n\r\n"
      "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  bool closed = false;
  std::string out = read_until_closed(client, &closed);
  EXPECT_TRUE(closed);
  auto first = out.find("\r\n\r\ngot onetwothreefour");
  auto second = out.find("\r\n\r\nhello");
  ASSERT_NE(first, std::string::npos) << out;
  ASSERT_NE(second, std::string::npos) << out;
  EXPECT_LT(first, second);
  on_loop([&] {
    EXPECT_EQ(state.delivered_while_paused, 0);
    EXPECT_EQ(state.pauses, 4);
    EXPECT_EQ(body_.lasts, 1);
  });
}

TEST_F(ExchangeTest, FinishBeforeTheBodyArrivedDropsTheBodyAndGoesOn) {
  on("/early", [this](Exchange& ex) {
    ++started_;
    ex.writer().start(200).body("early");
    ex.finish();
  });
  start();
  RawClient client(port_);
  // The body holds bytes that would parse as a request; a real one follows.
  std::string smuggled = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
  smuggled.resize(100, 's');
  ASSERT_TRUE(client.send_all("POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" +
                              smuggled + "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string out = read_until(client, "\r\n\r\nhello");
  EXPECT_EQ(out.find("Connection: close\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\r\n\r\nearly"), std::string::npos) << out;
  EXPECT_EQ(count(out, "HTTP/1.1 "), 2u) << "body bytes were parsed as a request: " << out;
  EXPECT_EQ(on_loop([&] { return started_; }), 1);
}

TEST_F(ExchangeTest, FinishFromATimerMidBodyDropsTheRestOfTheBody) {
  on("/early", [this](Exchange& ex) {
    ++started_;
    ex.set_body_handler([this](std::string_view piece, bool last) { body_.add(piece, last); });
    ex.loop()->run_after(30ms, [&ex] {
      EXPECT_FALSE(ex.body_complete());
      ex.writer().start(200).body("early");
      ex.finish();
    });
  });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all("POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" +
                              std::string(100, 'b')));
  std::string out = read_until(client, "early");
  EXPECT_EQ(out.find("Connection: close\r\n"), std::string::npos) << out;
  // The rest of the body comes after the response, starting with what
  // would parse as a request, and then a request.
  std::string rest = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
  rest.resize(900, 'c');
  ASSERT_TRUE(client.send_all(rest + "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"));
  out += read_until(client, "\r\n\r\nhello");
  EXPECT_EQ(count(out, "HTTP/1.1 "), 2u) << "body bytes were parsed as a request: " << out;
  on_loop([&] {
    EXPECT_EQ(body_.body, std::string(100, 'b'));
    EXPECT_EQ(body_.lasts, 0);
    EXPECT_EQ(started_, 1);
  });
}

TEST_F(ExchangeTest, FinishBeforeAChunkedBodyDropsItAndGoesOn) {
  on("/early", [](Exchange& ex) {
    ex.writer().start(405).body("no");
    ex.finish();
  });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all(
      "POST /early HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "20;ext=1\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n\r\n0\r\n\r\n"
      "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string out = read_until(client, "\r\n\r\nhello");
  EXPECT_TRUE(out.starts_with("HTTP/1.1 405 ")) << out;
  EXPECT_EQ(count(out, "HTTP/1.1 "), 2u) << out;
}

TEST_F(ExchangeTest, EarlyAnswerToAClientWaitingForContinueCloses) {
  // The client waits for a 100 (Continue) that never comes: it may never
  // send the body, so the connection cannot wait for it.
  on("/early", [](Exchange& ex) {
    ex.writer().start(413).body("too big");
    ex.finish();
  });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all("POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n"
                              "Expect: 100-continue\r\n\r\n"));
  bool closed = false;
  std::string out = read_until_closed(client, &closed);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(out.starts_with("HTTP/1.1 413 ")) << out;
  EXPECT_NE(out.find("Connection: close\r\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("100 Continue"), std::string::npos) << out;
}

TEST_F(ExchangeTest, MalformedBodyBeingDroppedClosesTheConnection) {
  on("/early", [](Exchange& ex) {
    ex.writer().start(200).body("early");
    ex.finish();
  });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all("POST /early HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  std::string out = read_until(client, "early");
  ASSERT_TRUE(client.send_all("zz\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n"));
  bool closed = false;
  out += read_until_closed(client, &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(count(out, "HTTP/1.1 "), 1u) << out;
}

TEST_F(ExchangeTest, ClientClosingWhileAnExchangeIsPendingRunsTheAbortHandlerOnce) {
  on("/pending", [this](Exchange& ex) {
    ++started_;
    ex.set_abort_handler([this] { ++aborts_; });
    // Never finished: the client goes first.
  });
  start();
  {
    RawClient client(port_);
    ASSERT_TRUE(client.send_all("GET /pending HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_TRUE(eventually([&] { return started_ == 1; }));
    EXPECT_EQ(on_loop([&] { return aborts_; }), 0);
  }
  ASSERT_TRUE(eventually([&] { return aborts_ == 1; }));
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(on_loop([&] { return aborts_; }), 1);
  // The server is fine.
  RawClient again(port_);
  ASSERT_TRUE(again.send_all("GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_TRUE(again.read_to_eof(nullptr, 5s).ends_with("\r\n\r\nhello"));
}

TEST_F(ExchangeTest, ClientClosingMidBodyRunsTheAbortHandlerOnce) {
  on("/upload", [this](Exchange& ex) {
    ex.set_body_handler([this](std::string_view piece, bool last) { body_.add(piece, last); });
    ex.set_abort_handler([this] { ++aborts_; });
  });
  start();
  {
    RawClient client(port_);
    ASSERT_TRUE(client.send_all("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789"));
    ASSERT_TRUE(eventually([&] { return body_.body.size() == 10; }));
  }
  ASSERT_TRUE(eventually([&] { return aborts_ == 1; }));
  std::this_thread::sleep_for(30ms);
  on_loop([&] {
    EXPECT_EQ(aborts_, 1);
    EXPECT_EQ(body_.lasts, 0);
    EXPECT_EQ(body_.body, "0123456789");
  });
}

TEST_F(ExchangeTest, AbortAfterAPartialResponseClosesTheConnection) {
  on("/abort", [this](Exchange& ex) {
    ++started_;
    ex.set_abort_handler([this] { ++aborts_; });
    ex.loop()->run_after(10ms, [&ex] {
      ex.writer().start(200).begin_stream();
      ex.writer().write("partial");
      ex.flush();
      ex.abort();
    });
  });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all(
      "GET /abort HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n"));
  bool closed = false;
  std::string out = read_until_closed(client, &closed);
  EXPECT_TRUE(closed) << "the connection stayed open after abort(): " << out;
  EXPECT_TRUE(out.starts_with("HTTP/1.1 200 OK\r\n")) << out;
  EXPECT_TRUE(out.ends_with("\r\n\r\n7\r\npartial\r\n")) << "not cut off after the partial body: " << out;
  EXPECT_EQ(out.find("hello"), std::string::npos) << "the pipelined request was answered: " << out;
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(on_loop([&] { return aborts_; }), 0) << "abort() ran the abort handler";
  EXPECT_EQ(on_loop([&] { return started_; }), 1);
}

TEST_F(ExchangeTest, DrainHandlerRunsOnceTheSlowClientHasTakenEverything) {
  struct State {
    size_t chunks = 0;
    size_t pending_at_wait = 0;
    size_t pending_at_drain = SIZE_MAX;
    int drains = 0;
  };
  State state;  // loop thread only
  const std::string chunk(65536, 'x');
  on("/big", [&state, &chunk](Exchange& ex) {
    ex.writer().start(200).begin_stream();
    // Queue far more than the kernel's socket buffers can take (some 4 MiB
    // on loopback while the client reads nothing), so that the queue cannot
    // drain until the client reads.
    while (ex.pending_output_bytes() < (8u << 20) && state.chunks < 1024) {
      ex.writer().write(chunk);
      ex.flush();
      ++state.chunks;
    }
    state.pending_at_wait = ex.pending_output_bytes();
    ex.set_drain_handler([&state, &ex] {
      ++state.drains;
      state.pending_at_drain = ex.pending_output_bytes();
      ex.writer().write("END");
      ex.writer().end_stream();
      ex.finish();
    });
    ex.wait_for_drain();
  });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all("GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  ASSERT_TRUE(eventually([&] { return state.pending_at_wait > 0; })) << "output never queued up";
  std::this_thread::sleep_for(50ms);  // the client is slow to read
  EXPECT_EQ(on_loop([&] { return state.drains; }), 0) << "drained while the client read nothing";
  bool closed = false;
  std::string out = read_until_closed(client, &closed);
  EXPECT_TRUE(closed);
  const size_t chunks = on_loop([&] { return state.chunks; });
  const size_t head = out.find("\r\n\r\n") + 4;
  const size_t framed_chunk = std::string_view("10000\r\n").size() + chunk.size() + 2;
  EXPECT_EQ(out.size() - head, chunks * framed_chunk + std::string_view("3\r\nEND\r\n0\r\n\r\n").size());
  EXPECT_TRUE(out.ends_with("\r\n3\r\nEND\r\n0\r\n\r\n")) << out.substr(out.size() - 40);
  on_loop([&] {
    EXPECT_EQ(state.drains, 1);
    EXPECT_EQ(state.pending_at_drain, 0u);
  });
}

// The Router is first in the chain: what it answers never reaches the
// handlers after it, and what nobody claims is 404.
TEST_F(ExchangeTest, RequestsTheRouterAnswersNeverReachLaterHandlers) {
  on("/later", [this](Exchange& ex) {
    ++started_;
    ex.writer().start(200).body("exchange");
    ex.finish();
  });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all(
      "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nbytes"
      "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  bool closed = false;
  std::string out = read_until_closed(client, &closed);
  auto a = out.find("\r\n\r\nhello");
  auto b = out.find("\r\n\r\nbytes");
  auto c = out.find("HTTP/1.1 404 ");
  ASSERT_TRUE(a != std::string::npos && b != std::string::npos && c != std::string::npos) << out;
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  on_loop([&] {
    EXPECT_EQ(handler_claims_, 1);  // /nope only
    EXPECT_EQ(started_, 0);
  });
}

TEST_F(ExchangeTest, UnknownMethodIs501WithoutAskingTheHandlers) {
  on("/later", [this](Exchange& ex) {
    ++started_;
    ex.writer().start(200).body("exchange");
    ex.finish();
  });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all("FROB /later HTTP/1.1\r\nHost: x\r\n\r\n"));
  bool closed = false;
  std::string out = read_until_closed(client, &closed);
  EXPECT_TRUE(out.starts_with("HTTP/1.1 501 ")) << out;
  EXPECT_TRUE(closed);
  on_loop([&] {
    EXPECT_EQ(handler_claims_, 0);
    EXPECT_EQ(started_, 0);
  });
}

TEST_F(ExchangeTest, ExpectContinueIsAnsweredForAStreamingBody) {
  on("/upload", [this](Exchange& ex) {
    ex.set_body_handler([this, &ex](std::string_view piece, bool last) {
      body_.add(piece, last);
      if (!last) return;
      ex.writer().start(200).body("got " + body_.body);
      ex.finish();
    });
  });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all(
      "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(client.read_exactly(25, 5s), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(client.send_all("body"));
  bool closed = false;
  std::string out = read_until_closed(client, &closed);
  EXPECT_TRUE(out.starts_with("HTTP/1.1 200 OK\r\n")) << out;
  EXPECT_TRUE(out.ends_with("\r\n\r\ngot body")) << out;
}

TEST_F(ExchangeTest, MalformedChunkedBodyFailsTheExchangeWith400) {
  on("/upload", [this](Exchange& ex) {
    ex.set_body_handler([this](std::string_view piece, bool last) { body_.add(piece, last); });
    ex.set_abort_handler([this] { ++aborts_; });
  });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all(
      "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\n"));
  bool closed = false;
  std::string out = read_until_closed(client, &closed);
  EXPECT_TRUE(out.starts_with("HTTP/1.1 400 ")) << out;
  EXPECT_TRUE(closed);
  ASSERT_TRUE(eventually([&] { return aborts_ == 1; }));
  on_loop([&] {
    EXPECT_EQ(body_.body, "abc");
    EXPECT_EQ(body_.lasts, 0);
  });
}

// HttpServer::drain(): "answer what is in progress with Connection: close".
// Regression: the exchange's keep-alive was fixed when it began, so a
// graceful stop waited out shutdown_timeout for it.
TEST_F(ExchangeTest, DrainAnswersAPendingExchangeWithConnectionClose) {
  Exchange* pending = nullptr;  // loop thread only
  on("/pending", [&pending](Exchange& ex) { pending = &ex; });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all("GET /pending HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(eventually([&] { return pending != nullptr; }));
  on_loop([&] {
    server_->drain();
    pending->writer().start(200).body("done");
    pending->finish();
  });
  std::string out = read_until(client, "done");
  bool closed = false;
  out += read_until_closed(client, &closed, 1s);  // the keep-alive timeout is 60 s
  EXPECT_TRUE(out.ends_with("\r\n\r\ndone")) << out;
  EXPECT_NE(out.find("Connection: close\r\n"), std::string::npos) << out;
  EXPECT_TRUE(closed) << "a draining server kept the connection open";
}

}  // namespace
}  // namespace tern::http

namespace tern::http {
namespace {

// A job that says when it goes.
struct Witness final : ExchangeJob {
  explicit Witness(int* destroyed) : destroyed_(destroyed) {}
  ~Witness() override { ++*destroyed_; }
  int* destroyed_;
};

TEST_F(ExchangeTest, AnAdoptedJobOutlivesTheRoundInWhichTheExchangeEnds) {
  int destroyed = 0;
  bool alive_after_finish = false;
  on("/job", [&](Exchange& ex) {
    ex.adopt(std::make_unique<Witness>(&destroyed));
    ex.writer().start(200).body("done");
    ex.finish();
    alive_after_finish = destroyed == 0;  // still inside the job's round
  });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all("GET /job HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_NE(read_until(client, "done").find("done"), std::string::npos);
  ASSERT_TRUE(eventually([&] { return destroyed == 1; }));
  EXPECT_TRUE(on_loop([&] { return alive_after_finish; }));
}

TEST_F(ExchangeTest, FindsAnExchangeByIdOnlyWhileItRuns) {
  std::vector<ExchangeId> ids;
  on("/wait", [&](Exchange& ex) {
    ids.push_back(ex.id());
    ex.loop()->run_after(20ms, [&, id = ex.id()] {
      Exchange* found = Exchange::find(id);
      ASSERT_EQ(found, &ex);
      found->writer().start(200).body("answered");
      found->finish();
      EXPECT_EQ(Exchange::find(id), nullptr) << "found after finish()";
    });
  });
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all("GET /wait HTTP/1.1\r\nHost: x\r\n\r\nGET /wait HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string out = read_until(client, "answered");
  while (count(out, "answered") < 2) {
    std::string more = read_until(client, "answered");
    if (more.empty()) break;
    out += more;
  }
  EXPECT_EQ(count(out, "answered"), 2u) << out;
  on_loop([&] {
    ASSERT_EQ(ids.size(), 2u);
    // The slot of the first is used again, under another generation.
    EXPECT_EQ(ids[0].slot, ids[1].slot);
    EXPECT_NE(ids[0].generation, ids[1].generation) << "two exchanges on one connection";
    EXPECT_EQ(Exchange::find(ids[0]), nullptr);
  });
}

TEST_F(ExchangeTest, AnExchangeWhoseClientLeftIsNotFound) {
  ExchangeId id;
  on("/left", [&](Exchange& ex) { id = ex.id(); });  // never answered
  start();
  {
    RawClient client(port_);
    ASSERT_TRUE(client.send_all("GET /left HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_TRUE(eventually([&] { return id.valid() && Exchange::find(id) != nullptr; }));
  }
  EXPECT_TRUE(eventually([&] { return Exchange::find(id) == nullptr; }));
}

}  // namespace
}  // namespace tern::http
