// HTTP/2 on a real server and socket: h2c by prior knowledge reaches the
// same handler chain as HTTP/1 (a Router handler, one that needs the body,
// an exchange that answers later), many streams share one connection, a
// stream the client resets lets its exchange go, and HTTP/1 on the same
// listener is untouched.
#include "http2/http2_connection.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "http/http_server.h"
#include "net/event_loop.h"
#include "support/h2_client.h"
#include "support/loop_runner.h"
#include "support/raw_socket.h"

namespace tern::http2 {
namespace {

using namespace std::chrono_literals;
using tern::testing::H2Client;
using tern::testing::LoopRunner;
using tern::testing::RawClient;

// Answers every request under /later from a timer, 20 ms on: an exchange
// (under /later/never, not at all).
class Later final : public http::RequestHandler {
 public:
  explicit Later(std::atomic<int>* aborted) : aborted_(aborted) {}
  http::Claim claim(http::Route& route) override {
    return route.path.starts_with("/later") ? http::Claim::kExchange : http::Claim::kPass;
  }
  void start(const http::Route& /*route*/, http::Exchange& exchange) override {
    const http::ExchangeId id = exchange.id();
    std::atomic<int>* aborted = aborted_;
    exchange.set_abort_handler([aborted] { ++*aborted; });
    if (exchange.request().path().starts_with("/later/never")) return;
    exchange.loop()->run_after(20ms, [id] {
      http::Exchange* ex = http::Exchange::find(id);
      if (ex == nullptr) return;
      ex->writer().start(200).body("later " + std::string(ex->request().path()));
      ex->finish();
    });
  }

 private:
  std::atomic<int>* aborted_;
};

// Reads the body of requests under /read through the exchange, then
// answers its length.
class Reader final : public http::RequestHandler {
 public:
  http::Claim claim(http::Route& route) override {
    return route.path.starts_with("/read") ? http::Claim::kExchange : http::Claim::kPass;
  }
  void start(const http::Route& /*route*/, http::Exchange& exchange) override {
    auto length = std::make_shared<size_t>(0);
    exchange.set_body_handler([&exchange, length](std::string_view piece, bool last) {
      *length += piece.size();
      if (!last) return;
      exchange.writer().start(200).body(std::to_string(*length));
      exchange.finish();
    });
  }
};

class Http2ConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    http::HttpServerOptions options;
    options.limits.body_timeout = 300ms;
    options.limits.keepalive_timeout = 600ms;
    options.http2 = http2_protocol();
    options.http2_cleartext = http::any_address;
    server_ = tern::testing::make_on_loop<http::HttpServer>(runner_, runner_.loop(), net::InetAddress(0, true),
                                                            options);
    runner_.run([&] {
      server_->get("/hello", [](const http::Request& r, http::ResponseWriter& w) {
        w.start(200).header("Content-Type", "text/plain").body("hello " + std::string(r.host()));
      });
      server_->get("/big", [](const http::Request&, http::ResponseWriter& w) {
        std::string big(3 << 20, '\0');
        for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i % 251);
        w.start(200).body(big);
      });
      server_->get("/unanswered", [](const http::Request&, http::ResponseWriter&) {});  // a handler bug
      server_->get("/half", [](const http::Request&, http::ResponseWriter& w) { w.start(200); });  // another
      server_->post("/echo", [](const http::Request& r, http::ResponseWriter& w) {
        w.start(200).body(std::string(r.body()));
      });
      server_->add_handler(std::make_unique<Later>(&aborted_));
      server_->add_handler(std::make_unique<Reader>());
      ASSERT_TRUE(server_->start().ok());
    });
  }

  // Carries bytes between `client` and the server until `done` holds.
  bool pump(RawClient& socket, H2Client& client, const std::function<bool()>& done,
            std::chrono::milliseconds limit = 5s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      const std::string out = client.output();
      if (!out.empty() && !socket.send_all(out)) return false;
      pollfd p{socket.fd(), POLLIN, 0};
      if (std::chrono::steady_clock::now() > deadline) return false;
      if (::poll(&p, 1, 20) <= 0) continue;
      char buf[65536];
      const ssize_t n = ::recv(socket.fd(), buf, sizeof buf, 0);
      if (n <= 0) return done();
      client.input(std::string_view(buf, static_cast<size_t>(n)));
    }
    return true;
  }

  LoopRunner runner_;
  tern::testing::LoopOwned<http::HttpServer> server_;
  std::atomic<int> aborted_{0};
};

TEST_F(Http2ConnectionTest, PriorKnowledgeReachesTheRouter) {
  RawClient socket(server_->listen_address().port());
  H2Client client;
  const int32_t id = client.get("/hello");
  ASSERT_TRUE(pump(socket, client, [&] { return client.seen[id].closed; }));
  EXPECT_EQ(client.seen[id].fields.at(":status"), "200");
  EXPECT_EQ(client.seen[id].body, "hello example.test");
  EXPECT_EQ(client.seen[id].fields.at("content-type"), "text/plain");
}

TEST_F(Http2ConnectionTest, ManyStreamsShareOneConnection) {
  RawClient socket(server_->listen_address().port());
  H2Client client;
  std::vector<int32_t> ids;
  for (int i = 0; i < 50; ++i) ids.push_back(client.get(i % 2 == 0 ? "/hello" : "/later/" + std::to_string(i)));
  ASSERT_TRUE(pump(socket, client, [&] {
    return std::all_of(ids.begin(), ids.end(), [&](int32_t id) { return client.seen[id].closed; });
  }));
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(client.seen[ids[i]].body, i % 2 == 0 ? "hello example.test" : "later /later/" + std::to_string(i));
  }
  // An unknown path is the chain's 404, as on HTTP/1.
  const int32_t missing = client.get("/nowhere");
  ASSERT_TRUE(pump(socket, client, [&] { return client.seen[missing].closed; }));
  EXPECT_EQ(client.seen[missing].fields.at(":status"), "404");
}

TEST_F(Http2ConnectionTest, AHandlerThatDoesNotAnswerGets500AndOneThatStopsHalfwayAReset) {
  RawClient socket(server_->listen_address().port());
  H2Client client;
  const int32_t unanswered = client.get("/unanswered");
  const int32_t half = client.get("/half");
  ASSERT_TRUE(pump(socket, client, [&] { return client.seen[unanswered].closed && client.seen[half].closed; }));
  EXPECT_EQ(client.seen[unanswered].fields.at(":status"), "500");
  EXPECT_EQ(client.seen[half].fields.count(":status"), 0u);
  EXPECT_EQ(client.seen[half].error_code, static_cast<uint32_t>(NGHTTP2_INTERNAL_ERROR));
  // The connection goes on (HTTP/2 cuts a stream, not the connection).
  const int32_t next = client.get("/hello");
  ASSERT_TRUE(pump(socket, client, [&] { return client.seen[next].closed; }));
  EXPECT_EQ(client.seen[next].fields.at(":status"), "200");
}

TEST_F(Http2ConnectionTest, ALargeResponseArrivesWholeThroughTheWindows) {
  RawClient socket(server_->listen_address().port());
  H2Client client;
  const int32_t id = client.get("/big");
  ASSERT_TRUE(pump(socket, client, [&] { return client.seen[id].closed; }));
  const std::string& body = client.seen[id].body;
  ASSERT_EQ(body.size(), 3u << 20);
  bool same = true;
  for (size_t i = 0; i < body.size() && same; ++i) same = body[i] == static_cast<char>(i % 251);
  EXPECT_TRUE(same) << "the body differs";
}

TEST_F(Http2ConnectionTest, ARouterHandlerGetsTheWholeBody) {
  RawClient socket(server_->listen_address().port());
  H2Client client;
  const std::string body(100 * 1024, 'e');
  const int32_t id =
      client.request({{":method", "POST"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/echo"}}, &body);
  ASSERT_TRUE(pump(socket, client, [&] { return client.seen[id].closed; }));
  EXPECT_EQ(client.seen[id].fields.at(":status"), "200");
  EXPECT_EQ(client.seen[id].body.size(), body.size());
  EXPECT_TRUE(client.seen[id].body == body);
}

TEST_F(Http2ConnectionTest, AStreamResetByTheClientLetsItsExchangeGo) {
  RawClient socket(server_->listen_address().port());
  H2Client client;
  const int32_t id = client.get("/later/never");
  EXPECT_FALSE(pump(socket, client, [&] { return false; }, 50ms));  // the request is in
  nghttp2_submit_rst_stream(client.session(), NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  ASSERT_TRUE(pump(socket, client, [&] { return aborted_.load() == 1; }))
      << "closed " << client.seen[id].closed << " error " << client.seen[id].error_code << " body "
      << client.seen[id].body;
  // The connection goes on.
  const int32_t next = client.get("/hello");
  ASSERT_TRUE(pump(socket, client, [&] { return client.seen[next].closed; }));
  EXPECT_EQ(client.seen[next].body, "hello example.test");
}

// The server chooses the protocol from the first bytes: a preface that
// comes a few bytes at a time is waited for, never taken for HTTP/1.
TEST_F(Http2ConnectionTest, APrefaceThatComesInPiecesIsWaitedFor) {
  RawClient socket(server_->listen_address().port());
  H2Client client;
  const int32_t id = client.get("/hello");
  const std::string out = client.output();
  ASSERT_GT(out.size(), 24u);
  for (size_t at = 0; at < 24; at += 5) {
    ASSERT_TRUE(socket.send_all(out.substr(at, std::min<size_t>(5, 24 - at))));
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(socket.send_all(out.substr(24)));
  ASSERT_TRUE(pump(socket, client, [&] { return client.seen[id].closed; }));
  EXPECT_EQ(client.seen[id].fields.at(":status"), "200");
  EXPECT_EQ(client.seen[id].body, "hello example.test");
}

// On an address that takes h2c, a first line that is neither HTTP/1 nor
// the whole preface is a bad preface: closed, with no HTTP/1 answer the
// client would read as frames (RFC 9113 3.4).
TEST_F(Http2ConnectionTest, ABadPrefaceIsClosedWithoutAnAnswer) {
  RawClient socket(server_->listen_address().port());
  ASSERT_TRUE(socket.send_all("PRI * HTTP/2.0\r\n\r\nXY\r\n\r\n"));
  bool eof = false;
  EXPECT_EQ(socket.read_to_eof(&eof, 2s), "");
  EXPECT_TRUE(eof);
}

// HTTP/2 connections are counted with HTTP/1's (one with a stream in
// progress is answering), and leave the count when they close.
TEST_F(Http2ConnectionTest, Http2ConnectionsAreCountedBesideHttp1Ones) {
  runner_.run([&] { server_->count_connection_phases(true); });
  auto h2 = std::make_unique<RawClient>(server_->listen_address().port());
  H2Client client;
  client.get("/later/never");
  ASSERT_TRUE(h2->send_all(client.output()));
  RawClient reading(server_->listen_address().port());
  ASSERT_TRUE(reading.send_all("GET /hello HTTP/1.1\r\nHo"));
  auto wait_for = [&](uint64_t writing, uint64_t reading_count) {
    http::HttpServer::ConnectionStates states;
    for (int i = 0; i < 30; ++i) {
      states = server_->connection_states();
      if (states.writing == writing && states.reading == reading_count && states.idle == 0) return true;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << "writing " << states.writing << ", reading " << states.reading << ", idle " << states.idle;
    return false;
  };
  EXPECT_TRUE(wait_for(1, 1));
  h2.reset();
  EXPECT_TRUE(wait_for(0, 1));
  EXPECT_EQ(aborted_.load(), 1);  // the stream's exchange was told
}

TEST_F(Http2ConnectionTest, Http1OnTheSameListenerIsUntouched) {
  RawClient socket(server_->listen_address().port());
  ASSERT_TRUE(socket.send_all("GET /hello HTTP/1.1\r\nHost: one\r\nConnection: close\r\n\r\n"));
  const std::string response = socket.read_to_eof(nullptr, 2s);
  EXPECT_TRUE(response.starts_with("HTTP/1.1 200 OK\r\n")) << response;
  EXPECT_NE(response.find("hello one"), std::string::npos) << response;
}

}  // namespace
}  // namespace tern::http2

namespace tern::http2 {
namespace {

TEST_F(Http2ConnectionTest, ABodyThatStopsComingGets408) {
  // A Router handler waits for the whole body; an exchange reads it.
  for (const char* path : {"/echo", "/read"}) {
    RawClient socket(server_->listen_address().port());
    H2Client client;
    const auto start = std::chrono::steady_clock::now();
    const int32_t id = client.request_stalled(
        {{":method", "POST"}, {":scheme", "http"}, {":authority", "example.test"}, {":path", path}});
    ASSERT_TRUE(pump(socket, client, [&] { return client.seen[id].fields.count(":status") != 0; })) << path;
    EXPECT_EQ(client.seen[id].fields.at(":status"), "408") << path;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s) << path;
  }
}

TEST_F(Http2ConnectionTest, AnIdleConnectionGetsGoaway) {
  RawClient socket(server_->listen_address().port());
  H2Client client;
  const int32_t id = client.get("/hello");
  ASSERT_TRUE(pump(socket, client, [&] { return client.seen[id].closed; }));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(pump(socket, client, [&] { return client.goaway_code >= 0; }));
  EXPECT_EQ(client.goaway_code, NGHTTP2_NO_ERROR);
  EXPECT_GT(std::chrono::steady_clock::now() - start, 400ms);
}

}  // namespace
}  // namespace tern::http2
