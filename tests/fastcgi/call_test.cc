// Call against a scripted application: a FastCGI "server" on loopback, on
// the test's own loop, reads the records a Call sends (BEGIN_REQUEST,
// PARAMS, STDIN), keeps what it saw, and once the empty STDIN record has
// arrived answers with bytes the test chose (or closes, or says nothing).
// The client side is a MemoryExchange: request bytes in, response bytes
// out, in memory. One thread, one loop, no client socket.
#include "fastcgi/relay.h"

#include <gtest/gtest.h>

#include <any>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fastcgi/protocol.h"
#include "net/buffer.h"
#include "net/connection_pool.h"
#include "net/connection_table.h"
#include "net/event_loop.h"
#include "net/inet_address.h"
#include "net/socket_address.h"
#include "net/tcp_connection.h"
#include "net/tcp_server.h"
#include "support/exchange_harness.h"
#include "support/temp_dir.h"
#include "upstream/group.h"

namespace tern::fastcgi {
namespace {

using namespace std::chrono_literals;
using testing::MemoryExchange;
using testing::TempDir;
using upstream::CallOptions;
using upstream::ResponseTap;

// A group of one server, as a FastCGI block has per loop.
std::unique_ptr<upstream::Group> group_of(net::EventLoop* loop, const net::ConnectionPoolOptions& options) {
  upstream::GroupServer server;
  server.address = options.address;
  server.spec.address = options.address.to_string();
  return std::make_unique<upstream::Group>(loop, options.name, std::vector<upstream::GroupServer>{server},
                                           upstream::Balancer::Method::kRoundRobin, options);
}

// Bytes that differ from one position to the next, so a piece out of place
// shows.
std::string pattern(size_t len) {
  std::string s(len, '\0');
  uint32_t x = 7;
  for (char& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

// END_REQUEST for request 1 (no encoder in protocol.h: a server never sends one).
std::string end_request(ProtocolStatus status = ProtocolStatus::kRequestComplete,
                        uint32_t app_status = 0) {
  const char record[16] = {1, static_cast<char>(RecordType::kEndRequest), 0, 1, 0, 8, 0, 0,
                           static_cast<char>(app_status >> 24), static_cast<char>(app_status >> 16),
                           static_cast<char>(app_status >> 8), static_cast<char>(app_status),
                           static_cast<char>(status), 0, 0, 0};
  return std::string(record, sizeof record);
}

// `data` as records of `type` holding at most `record` bytes each, without
// the empty record that ends the stream.
std::string records(RecordType type, std::string_view data, size_t record = kMaxContent) {
  net::Buffer out;
  for (size_t at = 0; at < data.size(); at += record) {
    append_stream(out, type, 1, data.substr(at, record));
  }
  return out.retrieve_all_as_string();
}

// A whole answer: STDOUT (a CGI response), the end of STDOUT, END_REQUEST.
std::string answer(std::string_view cgi, size_t record = kMaxContent) {
  net::Buffer end;
  append_stream(end, RecordType::kStdout, 1, {});
  return records(RecordType::kStdout, cgi, record) + end.retrieve_all_as_string() + end_request();
}

// What the application saw of one request.
struct SeenRequest {
  uint16_t id = 0;
  uint16_t role = 0;
  bool keep_conn = false;
  std::vector<std::pair<std::string, std::string>> params;
  bool params_ok = false;  // the PARAMS stream ended and decoded
  std::string body;        // STDIN
  size_t stdin_records = 0;
  bool complete = false;   // the empty STDIN record arrived

  std::optional<std::string> param(std::string_view name) const {
    for (const auto& [n, v] : params) {
      if (n == name) return v;
    }
    return std::nullopt;
  }
};

// What the application does once a request is complete: sends `pieces`
// (the first at once, each next one a millisecond later, so they arrive in
// separate reads), then closes if `close`. No pieces and no close: silence.
struct Reply {
  std::vector<std::string> pieces;
  bool close = false;
  std::chrono::milliseconds after_first{1};  // between the first piece and the second
};

Reply send(std::string bytes) { return Reply{{std::move(bytes)}, false}; }
Reply send_then_close(std::string bytes) { return Reply{{std::move(bytes)}, true}; }
Reply close_at_once() { return Reply{{}, true}; }
Reply silence() { return Reply{}; }
// `bytes` in pieces of `size`, a moment apart.
Reply trickle(std::string_view bytes, size_t size) {
  Reply r;
  for (size_t at = 0; at < bytes.size(); at += size) r.pieces.emplace_back(bytes.substr(at, size));
  return r;
}

// The scripted application: a TcpServer on the test loop, port 0 on
// 127.0.0.1. Requests get the script's replies in order, the last one
// again for every request after it.
class ScriptedApp {
 public:
  explicit ScriptedApp(net::EventLoop* loop)
      : loop_(loop),
        server_(std::make_unique<net::TcpServer>(loop, net::InetAddress(0, /*loopback_only=*/true))) {
    server_->set_connection_callback([this](net::TcpConnection& conn) {
      if (conn.connected()) {
        ++accepts;
        conn.context() = Parse{};
      } else {
        ++closes;
      }
    });
    server_->set_message_callback(
        [this](net::TcpConnection& conn, net::Buffer& input) { on_message(conn, input); });
    ok_ = server_->start().ok();
  }
  ~ScriptedApp() {
    for (net::TimerId timer : timers_) loop_->cancel(timer);
    server_.reset();  // its close callbacks still find us
  }
  ScriptedApp(const ScriptedApp&) = delete;
  ScriptedApp& operator=(const ScriptedApp&) = delete;

  bool ok() const { return ok_; }
  net::SocketAddress address() const { return server_->listen_address(); }
  void script(std::vector<Reply> replies) { replies_ = std::move(replies); }
  void reply(Reply r) { script({std::move(r)}); }
  const std::vector<SeenRequest>& requests() const { return requests_; }
  // The last request has been read to its end.
  bool has_complete_request() const { return !requests_.empty() && requests_.back().complete; }

  int accepts = 0;
  int closes = 0;

 private:
  struct Parse {  // per connection, in its context()
    size_t request = 0;  // index in requests_ of the one in progress
    bool begun = false;
    std::string params;
  };

  // Whole records only; a partial one waits in the input for its rest.
  void on_message(net::TcpConnection& conn, net::Buffer& input) {
    auto* parse = std::any_cast<Parse>(&conn.context());
    ASSERT_NE(parse, nullptr);
    while (input.readable_bytes() >= kHeaderSize) {
      const auto* h = reinterpret_cast<const uint8_t*>(input.peek());
      const size_t length = size_t{h[4]} << 8 | h[5];
      const size_t total = kHeaderSize + length + h[6];
      if (input.readable_bytes() < total) return;
      EXPECT_EQ(h[0], kVersion);
      const auto type = static_cast<RecordType>(h[1]);
      const auto id = static_cast<uint16_t>(h[2] << 8 | h[3]);
      std::string content(input.peek() + kHeaderSize, length);
      input.retrieve(total);
      on_record(conn, *parse, type, id, content);
    }
  }

  void on_record(net::TcpConnection& conn, Parse& parse, RecordType type, uint16_t id,
                 const std::string& content) {
    if (type == RecordType::kBeginRequest) {
      ASSERT_EQ(content.size(), 8u);
      SeenRequest seen;
      seen.id = id;
      seen.role = static_cast<uint16_t>(static_cast<uint8_t>(content[0]) << 8 |
                                        static_cast<uint8_t>(content[1]));
      seen.keep_conn = (content[2] & kKeepConn) != 0;
      requests_.push_back(std::move(seen));
      parse = Parse{requests_.size() - 1, true, {}};
      return;
    }
    ASSERT_TRUE(parse.begun) << "a record before BEGIN_REQUEST";
    SeenRequest& seen = requests_[parse.request];
    EXPECT_EQ(id, seen.id);
    switch (type) {
      case RecordType::kParams:
        if (!content.empty()) {
          parse.params += content;
        } else {
          seen.params_ok = decode_pairs(parse.params, [&seen](std::string_view n, std::string_view v) {
            seen.params.emplace_back(n, v);
          });
        }
        return;
      case RecordType::kStdin:
        if (!content.empty()) {
          seen.body += content;
          ++seen.stdin_records;
          return;
        }
        seen.complete = true;
        return respond(conn);
      default:
        ADD_FAILURE() << "unexpected record type " << static_cast<int>(type);
    }
  }

  void respond(net::TcpConnection& conn) {
    if (replies_.empty()) return;
    const Reply& r = replies_[std::min(answered_++, replies_.size() - 1)];
    send_from(conn.id(), std::make_shared<const Reply>(r), 0);
  }

  void send_from(net::ConnectionId id, std::shared_ptr<const Reply> r, size_t next) {
    net::TcpConnection* conn = loop_->connections().find(id);
    if (conn == nullptr || !conn->connected()) return;
    if (next < r->pieces.size()) conn->send(r->pieces[next]);
    if (next + 1 < r->pieces.size()) {
      timers_.push_back(loop_->run_after(next == 0 ? r->after_first : 1ms,
                                         [this, id, r, next] { send_from(id, r, next + 1); }));
    } else if (r->close) {
      conn->close_after_write();
    }
  }

  net::EventLoop* const loop_;
  std::unique_ptr<net::TcpServer> server_;
  bool ok_ = false;
  std::vector<Reply> replies_;
  size_t answered_ = 0;
  std::vector<SeenRequest> requests_;
  std::vector<net::TimerId> timers_;
};

// Sees what a Call relays, into a record the test keeps.
struct TapRecord {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::vector<bool> ends;  // on_end, every call
  // What wants_rest() answers: before the head, and after it.
  bool wants_before_head = false;
  bool wants_after_head = false;
  std::string gone_target;       // on_client_gone's request
  int status_when_gone = -1;
  ResponseTap::ClientAnswer answer;  // what client_answer() says
};

class RecordingTap final : public ResponseTap {
 public:
  explicit RecordingTap(TapRecord* record) : record_(record) {}
  void on_head(int status, std::span<const http::Header> headers) override {
    record_->status = status;
    for (const http::Header& h : headers) record_->headers.emplace_back(h.name, h.value);
  }
  void on_body(std::string_view piece) override { record_->body += piece; }
  void on_end(bool complete) override { record_->ends.push_back(complete); }
  bool wants_rest() const override {
    return record_->status == 0 ? record_->wants_before_head : record_->wants_after_head;
  }
  void on_client_gone(const http::Request& request) override {
    record_->gone_target = request.target();
    record_->status_when_gone = record_->status;
  }
  ClientAnswer client_answer(int /*status*/, std::span<const http::Header> /*fields*/,
                             std::optional<uint64_t> /*length*/) override {
    return record_->answer;
  }

 private:
  TapRecord* const record_;
};

// The PARAMS a location would send, cut down to a few: BEGIN_REQUEST
// (request 1, keep the connection) and the variables a script needs to
// read its request. CONTENT_LENGTH is the gathered length when the body
// was buffered first, else the declared one, else absent.
RequestHeadWriter params_for(const http::Request& request) {
  std::optional<uint64_t> declared;
  if (request.body_framing() == http::BodyFraming::kContentLength) {
    declared = request.content_length();
  }
  return [method = std::string(request.method_text()), uri = std::string(request.target()),
          declared](net::Buffer& out, std::optional<uint64_t> gathered) {
    append_begin_request(out, 1, Role::kResponder, /*keep_conn=*/true);
    ParamsWriter params(out, 1);
    params.add("SCRIPT_FILENAME", "/srv/www/index.php");
    params.add("REQUEST_METHOD", method);
    params.add("REQUEST_URI", uri);
    if (std::optional<uint64_t> length = gathered ? gathered : declared) {
      params.add("CONTENT_LENGTH", std::to_string(*length));
    }
    params.finish();
  };
}

constexpr std::string_view kGet = "GET /index.php?x=1 HTTP/1.1\r\nHost: a\r\n\r\n";

std::string post(std::string_view body) {
  return "POST /upload.php HTTP/1.1\r\nHost: a\r\nContent-Type: application/octet-stream\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}

class CallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(app_.ok());
    ASSERT_TRUE(temp_.ok());
    options_.temp_dir = temp_.path();
  }

  // Starts a Call for `ex` on `group` with options_ (and tap_, if set).
  void call(MemoryExchange& ex, upstream::Group& group) {
    ASSERT_TRUE(ex.parsed());
    ex.start([this, &group](http::Exchange& exchange) {
      relay(exchange, group, options_, params_for(exchange.request()), std::move(tap_));
    });
  }
  void call(MemoryExchange& ex) { call(ex, *group_); }

  // A 100 KiB POST that the client sends in 4 KiB pieces, answered `answer_text`.
  MemoryExchange& post_in_pieces(const std::string& body, const std::string& answer_text) {
    app_.reply(send(answer(answer_text)));
    exchanges_.push_back(std::make_unique<MemoryExchange>(&loop_, post(body)));
    exchanges_.back()->set_body_piece(4096);
    call(*exchanges_.back());
    return *exchanges_.back();
  }
  // Relays `head` and `body` from the application to `ex`, whose client has
  // 1 MiB it has not taken yet: the whole response arrives, and the
  // connection goes back to the pool.
  testing::ParsedResponse relay_to_slow_client(MemoryExchange& ex, const std::string& head,
                                               const std::string& body) {
    app_.reply(send(answer(head + body)));
    ex.set_pending_output(1 << 20);
    call(ex);
    EXPECT_TRUE(ex.run());
    EXPECT_TRUE(ex.finished());
    testing::ParsedResponse r = ex.response();
    EXPECT_TRUE(r.complete);
    EXPECT_EQ(r.body.size(), body.size());
    EXPECT_TRUE(r.body == body) << "the relayed body differs";
    EXPECT_EQ(pool_.idle(), 1u);
    return r;
  }
  // The one request the application got, with `body` whole as its STDIN.
  const SeenRequest& only_request_with(const std::string& body) {
    EXPECT_EQ(app_.requests().size(), 1u);
    const SeenRequest& seen = app_.requests().at(0);
    EXPECT_EQ(seen.param("CONTENT_LENGTH"), std::to_string(body.size()));  // as declared
    EXPECT_EQ(seen.body.size(), body.size());
    EXPECT_TRUE(seen.body == body) << "STDIN differs from the request body";
    return seen;
  }

  // Turns the loop until `done()` holds or `limit` has passed; whether it holds.
  bool turn_until(const std::function<bool()>& done, std::chrono::milliseconds limit = 5s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      const net::TimerId tick = loop_.run_after(1ms, [this] { loop_.quit(); });
      loop_.loop();
      loop_.cancel(tick);
    }
    return done();
  }

  // Built in this order, destroyed in the other. The MemoryExchanges are
  // local to each test or in exchanges_, so they go before the pools their
  // calls use.
  net::EventLoop loop_;
  TempDir temp_;
  ScriptedApp app_{&loop_};
  std::unique_ptr<upstream::Group> group_ =
      group_of(&loop_, net::ConnectionPoolOptions{.address = app_.address(), .name = "app"});
  net::ConnectionPool& pool_ = group_->pool(0);
  CallOptions options_;
  std::unique_ptr<ResponseTap> tap_;
  std::vector<std::unique_ptr<MemoryExchange>> exchanges_;  // post_in_pieces()'s
};

// ---- Relaying a response ----

TEST_F(CallTest, RelaysStatusFieldsAndBody) {
  app_.reply(send(answer("Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nhello")));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(ex.run());

  testing::ParsedResponse r = ex.response();
  EXPECT_TRUE(ex.finished());
  EXPECT_FALSE(ex.aborted());
  EXPECT_TRUE(r.head.starts_with("HTTP/1.1 200 OK\r\n")) << r.head;
  EXPECT_EQ(r.header("Content-Type"), "text/plain");
  // The application gave no length: the body is chunked.
  EXPECT_EQ(r.header("Transfer-Encoding"), "chunked");
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.body, "hello");

  // What the application was sent.
  ASSERT_EQ(app_.requests().size(), 1u);
  const SeenRequest& seen = app_.requests()[0];
  EXPECT_EQ(seen.id, 1);
  EXPECT_EQ(seen.role, static_cast<uint16_t>(Role::kResponder));
  EXPECT_TRUE(seen.keep_conn);
  EXPECT_TRUE(seen.params_ok);
  EXPECT_EQ(seen.param("REQUEST_METHOD"), "GET");
  EXPECT_EQ(seen.param("REQUEST_URI"), "/index.php?x=1");
  EXPECT_EQ(seen.param("CONTENT_LENGTH"), std::nullopt);
  EXPECT_TRUE(seen.complete);
  EXPECT_EQ(seen.stdin_records, 0u);
  // END_REQUEST on a record boundary: the connection went back to the pool.
  EXPECT_EQ(pool_.connections(), 1u);
  EXPECT_EQ(pool_.idle(), 1u);
}

TEST_F(CallTest, ContentLengthFromTheApplicationFramesTheResponse) {
  app_.reply(send(answer("Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello")));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(ex.run());
  testing::ParsedResponse r = ex.response();
  EXPECT_EQ(r.status, 200);  // no Status field: 200
  EXPECT_EQ(r.header("Content-Length"), "5");
  EXPECT_EQ(r.header("Transfer-Encoding"), "");
  EXPECT_EQ(r.body, "hello");
  EXPECT_TRUE(ex.finished());
}

TEST_F(CallTest, RelaysA404WithTheApplicationsPage) {
  app_.reply(send(answer("Status: 404 Not Found\r\nContent-Type: text/html\r\n\r\n<p>no such page</p>")));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(ex.run());
  testing::ParsedResponse r = ex.response();
  EXPECT_EQ(r.status, 404);
  EXPECT_TRUE(r.head.starts_with("HTTP/1.1 404 Not Found\r\n")) << r.head;
  EXPECT_EQ(r.header("Content-Type"), "text/html");
  EXPECT_EQ(r.body, "<p>no such page</p>");
  EXPECT_TRUE(ex.finished());
}

TEST_F(CallTest, HeadRequestGetsTheHeadOnly) {
  app_.reply(send(answer("Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello")));
  MemoryExchange ex(&loop_, "HEAD /index.php HTTP/1.1\r\nHost: a\r\n\r\n");
  call(ex);
  ASSERT_TRUE(ex.run());
  testing::ParsedResponse r = ex.response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Content-Length"), "5");
  EXPECT_EQ(r.body, "");
  // The dropped body does not count as a short one.
  EXPECT_TRUE(ex.finished());
  EXPECT_FALSE(ex.aborted());
  ASSERT_EQ(app_.requests().size(), 1u);
  EXPECT_EQ(app_.requests()[0].param("REQUEST_METHOD"), "HEAD");
}

TEST_F(CallTest, HopByHopAndInternalFieldsAreNotRelayed) {
  options_.extra_header_name = "X-Cache";
  options_.extra_header_value = "MISS";
  app_.reply(send(answer(
      "Status: 200 OK\r\n"
      "Content-Type: text/plain\r\n"
      "X-Powered-By: PHP/8.3\r\n"
      "Connection: close\r\n"
      "Server: php-fpm\r\n"
      "Date: Thu, 01 Jan 1970 00:00:00 GMT\r\n"
      "X-Accel-Expires: 60\r\n"
      "X-Sendfile: /etc/passwd\r\n"
      "Content-Length: 2\r\n"
      "\r\n"
      "ok")));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(ex.run());
  testing::ParsedResponse r = ex.response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("X-Powered-By"), "PHP/8.3");
  EXPECT_EQ(r.header("X-Cache"), "MISS");
  // The server's own Server and Date, once each.
  EXPECT_EQ(r.header("Server"), "tern");
  EXPECT_EQ(r.header("Date"), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(r.head.find("php-fpm"), std::string::npos) << r.head;
  EXPECT_EQ(r.head.find("1970"), std::string::npos) << r.head;
  EXPECT_EQ(r.head.find("Connection"), std::string::npos) << r.head;
  EXPECT_EQ(r.head.find("X-Accel"), std::string::npos) << r.head;
  EXPECT_EQ(r.head.find("X-Sendfile"), std::string::npos) << r.head;
  // Content-Length is the server's, written once, from the application's value.
  EXPECT_EQ(r.head.find("Content-Length"), r.head.rfind("Content-Length")) << r.head;
  EXPECT_EQ(r.header("Content-Length"), "2");
  EXPECT_EQ(r.body, "ok");
}

TEST_F(CallTest, ManySmallRecordsInManyReadsArriveIntact) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += "line " + std::to_string(i) + "\n";
  const std::string head = "Status: 200 OK\r\nContent-Type: text/plain\r\n\r\n";
  // Seven bytes a record, so records split the head's lines and the body
  // anywhere; STDERR in between goes to the log, not to the client.
  net::Buffer end;
  append_stream(end, RecordType::kStdout, 1, {});
  const std::string bytes = records(RecordType::kStdout, head, 7) +
                            records(RecordType::kStderr, "PHP Notice: half a line") +
                            records(RecordType::kStdout, text.substr(0, 1000), 7) +
                            records(RecordType::kStderr, " and the rest\nanother\n") +
                            records(RecordType::kStdout, text.substr(1000), 7) +
                            end.retrieve_all_as_string() + end_request();
  // And the connection hands them over in pieces that cut record headers.
  app_.reply(trickle(bytes, 333));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(ex.run());
  testing::ParsedResponse r = ex.response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Content-Type"), "text/plain");
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.body, text);
  EXPECT_TRUE(ex.finished());
  EXPECT_EQ(pool_.idle(), 1u);
}

TEST_F(CallTest, ConnectionServesTheNextCall) {
  app_.reply(send(answer("Content-Type: text/plain\r\n\r\nagain")));
  MemoryExchange first(&loop_, std::string(kGet));
  MemoryExchange second(&loop_, "GET /other.php HTTP/1.1\r\nHost: a\r\n\r\n");
  call(first);
  ASSERT_TRUE(first.run());
  EXPECT_EQ(first.response().body, "again");
  ASSERT_EQ(pool_.idle(), 1u);

  call(second);
  ASSERT_TRUE(second.run());
  EXPECT_EQ(second.response().status, 200);
  EXPECT_EQ(second.response().body, "again");
  // One connection, two requests on it.
  EXPECT_EQ(app_.accepts, 1);
  ASSERT_EQ(app_.requests().size(), 2u);
  EXPECT_EQ(app_.requests()[1].param("REQUEST_URI"), "/other.php");
  EXPECT_EQ(pool_.connections(), 1u);
  EXPECT_EQ(pool_.idle(), 1u);
}

// ---- The request body ----

TEST_F(CallTest, BufferedBodyReachesTheApplicationWhole) {
  const std::string body = pattern(100 * 1024);
  MemoryExchange& ex =
      post_in_pieces(body, "Status: 201 Created\r\nContent-Type: text/plain\r\n\r\nstored");
  // Gathered first (past request_memory, in a temp file): the client is
  // never held back.
  EXPECT_FALSE(ex.paused());
  ASSERT_TRUE(ex.run());
  EXPECT_EQ(ex.response().status, 201);
  EXPECT_EQ(ex.response().body, "stored");
  const SeenRequest& seen = only_request_with(body);
  EXPECT_EQ(seen.param("REQUEST_METHOD"), "POST");
  EXPECT_GT(seen.stdin_records, 1u);  // a record holds at most 65535 bytes
}

TEST_F(CallTest, StreamedBodyReachesTheApplicationWhole) {
  options_.request_buffering = false;
  const std::string body = pattern(100 * 1024);
  MemoryExchange& ex = post_in_pieces(body, "Content-Type: text/plain\r\n\r\nstreamed");
  // The connection is still being opened: the client is held back once
  // 64 KiB wait for it.
  EXPECT_TRUE(ex.paused());
  ASSERT_TRUE(ex.run());
  EXPECT_EQ(ex.response().status, 200);
  EXPECT_EQ(ex.response().body, "streamed");
  EXPECT_EQ(only_request_with(body).stdin_records, 25u);  // one per piece the client sent
}

// ---- Failures before the response ----

TEST_F(CallTest, ClosingANewConnectionWithoutAnAnswerIs502WithoutARetry) {
  app_.reply(close_at_once());
  MemoryExchange ex(&loop_, post("name=value"));
  call(ex);
  ASSERT_TRUE(ex.run());
  EXPECT_EQ(ex.response().status, 502);
  EXPECT_TRUE(ex.finished());
  // The connection was opened for this request: the application may have
  // acted on it (a worker that died in it), so it is not sent again.
  EXPECT_EQ(app_.requests().size(), 1u);
  EXPECT_EQ(app_.accepts, 1);
  EXPECT_EQ(pool_.connections(), 0u);
}

TEST_F(CallTest, AStalePooledConnectionIsRetriedOnANewOne) {
  app_.script({send(answer("Content-Type: text/plain\r\n\r\nfirst")), close_at_once(),
               send(answer("Content-Type: text/plain\r\n\r\nsecond try"))});
  MemoryExchange first(&loop_, std::string(kGet));
  call(first);
  ASSERT_TRUE(first.run());
  EXPECT_EQ(first.response().body, "first");
  ASSERT_EQ(pool_.idle(), 1u);
  // The pooled connection closes unanswered (a worker recycled after its
  // last request): nothing was done with the request, so it goes again,
  // on a new connection.
  MemoryExchange second(&loop_, post("name=value"));
  call(second);
  ASSERT_TRUE(second.run());
  EXPECT_EQ(second.response().status, 200);
  EXPECT_EQ(second.response().body, "second try");
  ASSERT_EQ(app_.requests().size(), 3u);
  EXPECT_EQ(app_.requests()[2].body, "name=value");
  EXPECT_EQ(app_.accepts, 2);
  EXPECT_EQ(pool_.idle(), 1u);
}

TEST_F(CallTest, StreamedBodyIsNotSentTwice) {
  options_.request_buffering = false;
  app_.script({send(answer("Content-Type: text/plain\r\n\r\nfirst")), close_at_once()});
  MemoryExchange first(&loop_, std::string(kGet));
  call(first);
  ASSERT_TRUE(first.run());
  ASSERT_EQ(pool_.idle(), 1u);
  // On the pooled connection, which closes unanswered: a retry would be
  // allowed, but the streamed bytes are gone and cannot be replayed.
  MemoryExchange ex(&loop_, post("name=value"));
  call(ex);
  ASSERT_TRUE(ex.run());
  EXPECT_EQ(ex.response().status, 502);
  ASSERT_EQ(app_.requests().size(), 2u);
  EXPECT_EQ(app_.requests()[1].body, "name=value");
  EXPECT_EQ(app_.accepts, 1);
}

TEST_F(CallTest, SilentApplicationIs504AfterTheReadTimeout) {
  options_.read_timeout = 100ms;
  app_.reply(silence());
  MemoryExchange ex(&loop_, std::string(kGet));
  const auto began = std::chrono::steady_clock::now();
  call(ex);
  ASSERT_TRUE(ex.run());
  // Timers count from the loop's cached clock, in whole milliseconds.
  EXPECT_GE(std::chrono::steady_clock::now() - began, 90ms);
  EXPECT_EQ(ex.response().status, 504);
  EXPECT_TRUE(ex.finished());
  EXPECT_TRUE(app_.has_complete_request());
  // What the application might still send belongs to no one: the
  // connection is closed, not pooled.
  EXPECT_EQ(pool_.connections(), 0u);
  EXPECT_TRUE(turn_until([&] { return app_.closes == 1; }));
}

TEST_F(CallTest, InvalidStatusFieldIs502) {
  app_.reply(send(answer("Status: abc\r\nContent-Type: text/plain\r\n\r\nfrom the app")));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(ex.run());
  testing::ParsedResponse r = ex.response();
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(r.body.find("from the app"), std::string::npos);
  EXPECT_TRUE(ex.finished());
  EXPECT_EQ(pool_.connections(), 0u);
}

TEST_F(CallTest, HeadCutOffByACloseIs502) {
  // Garbage with no end of head, then the connection closes: bytes did
  // arrive, so there is no second try.
  app_.reply(send_then_close(records(RecordType::kStdout, "this is not a CGI head")));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(ex.run());
  EXPECT_EQ(ex.response().status, 502);
  EXPECT_EQ(app_.requests().size(), 1u);
}

TEST_F(CallTest, EndRequestWithoutAHeadIs502) {
  app_.reply(send(end_request()));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(ex.run());
  EXPECT_EQ(ex.response().status, 502);
}

TEST_F(CallTest, OverloadedApplicationIs503) {
  app_.reply(send(end_request(ProtocolStatus::kOverloaded)));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(ex.run());
  EXPECT_EQ(ex.response().status, 503);
  EXPECT_EQ(pool_.idle(), 0u);  // not a clean end: not kept
}

TEST_F(CallTest, InterimStatusIs502) {
  app_.reply(send(answer("Status: 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(ex.run());
  EXPECT_EQ(ex.response().status, 502);
  EXPECT_EQ(ex.output().find("103"), std::string::npos);
}

TEST_F(CallTest, BadRecordIs502) {
  const char version2[8] = {2, static_cast<char>(RecordType::kStdout), 0, 1, 0, 0, 0, 0};
  app_.reply(send(std::string(version2, sizeof version2)));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(ex.run());
  EXPECT_EQ(ex.response().status, 502);
  EXPECT_EQ(pool_.connections(), 0u);
}

TEST_F(CallTest, NoApplicationListeningIs502) {
  auto nowhere = group_of(
      &loop_, net::ConnectionPoolOptions{
                  .address = net::SocketAddress::unix_path(temp_.at("nobody.sock")).value(),
                  .name = "nowhere"});
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex, *nowhere);
  ASSERT_TRUE(ex.run());
  EXPECT_EQ(ex.response().status, 502);
  EXPECT_TRUE(ex.finished());
}

TEST_F(CallTest, EveryConnectionBusyTooLongIs503) {
  app_.reply(silence());
  auto group = group_of(&loop_, net::ConnectionPoolOptions{.address = app_.address(),
                                                          .name = "one",
                                                          .max_connections = 1,
                                                          .queue_timeout = 100ms});
  net::ConnectionPool& one = group->pool(0);
  MemoryExchange holder(&loop_, std::string(kGet));
  MemoryExchange waiter(&loop_, std::string(kGet));
  call(holder, *group);
  ASSERT_TRUE(turn_until([&] { return app_.has_complete_request(); }));
  call(waiter, *group);
  EXPECT_EQ(one.waiting(), 1u);
  ASSERT_TRUE(waiter.run());
  EXPECT_EQ(waiter.response().status, 503);
  EXPECT_EQ(app_.requests().size(), 1u);
  EXPECT_FALSE(holder.finished());  // still waiting for its answer
}

// ---- Failures after the head was sent ----

TEST_F(CallTest, BodyShorterThanItsContentLengthAbortsTheExchange) {
  app_.reply(send(answer("Content-Type: text/plain\r\nContent-Length: 10\r\n\r\nabc")));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(ex.run());
  // The head went out; only a close can say the rest never will.
  EXPECT_TRUE(ex.aborted());
  EXPECT_FALSE(ex.finished());
  testing::ParsedResponse r = ex.response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Content-Length"), "10");
  EXPECT_EQ(r.body, "abc");
}

TEST_F(CallTest, CloseInTheMiddleOfTheBodyAbortsTheExchange) {
  app_.reply(send_then_close(records(RecordType::kStdout, "Content-Type: text/plain\r\n\r\npartial")));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(ex.run());
  EXPECT_TRUE(ex.aborted());
  EXPECT_FALSE(ex.finished());
  testing::ParsedResponse r = ex.response();
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.complete);  // no last chunk
  EXPECT_NE(ex.output().find("partial"), std::string::npos);
  EXPECT_EQ(app_.requests().size(), 1u);  // answered: not retried
}

// ---- The client's side ----

TEST_F(CallTest, ClientLeavingWhileTheApplicationIsSilentClosesTheConnection) {
  app_.reply(silence());
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(turn_until([&] { return app_.has_complete_request(); }));
  EXPECT_EQ(pool_.connections(), 1u);
  EXPECT_EQ(pool_.idle(), 0u);

  ex.disconnect();
  // Mid-exchange, the connection cannot be reused: it is closed at once.
  EXPECT_EQ(pool_.connections(), 0u);
  EXPECT_TRUE(turn_until([&] { return app_.closes == 1; }));
  EXPECT_TRUE(ex.output().empty());
  EXPECT_FALSE(ex.finished());
  EXPECT_FALSE(ex.aborted());
}

TEST_F(CallTest, ClientLeavingBeforeTheConnectionOpensLeavesItForTheNext) {
  app_.reply(send(answer("Content-Type: text/plain\r\n\r\nnext")));
  MemoryExchange gone(&loop_, std::string(kGet));
  MemoryExchange next(&loop_, std::string(kGet));
  call(gone);
  EXPECT_EQ(pool_.waiting(), 1u);
  gone.disconnect();
  EXPECT_EQ(pool_.waiting(), 0u);
  // The connect goes on; the new connection waits in the pool, unused.
  ASSERT_TRUE(turn_until([&] { return pool_.idle() == 1 && app_.accepts == 1; }));
  EXPECT_TRUE(app_.requests().empty());

  call(next);
  ASSERT_TRUE(next.run());
  EXPECT_EQ(next.response().body, "next");
  EXPECT_EQ(app_.accepts, 1);
  EXPECT_TRUE(gone.output().empty());
}

TEST_F(CallTest, LargeUnbufferedResponseWaitsForASlowClient) {
  options_.response_buffering = false;
  const std::string body = pattern(1 << 20);
  // More queued than the Call lets pile up: it pauses the application and
  // waits for the client to drain before reading on.
  MemoryExchange ex(&loop_, std::string(kGet));
  testing::ParsedResponse r = relay_to_slow_client(
      ex, "Content-Type: application/octet-stream\r\nContent-Length: 1048576\r\n\r\n", body);
  EXPECT_EQ(r.header("Content-Length"), "1048576");
  EXPECT_GT(ex.flushes(), 0u);
}

TEST_F(CallTest, LargeBufferedResponseSpillsToAFileAndCompletes) {
  options_.response_memory = 4096;  // the rest in a temp file under temp_
  const std::string body = pattern(1 << 20);
  MemoryExchange ex(&loop_, std::string(kGet));
  relay_to_slow_client(ex, "Content-Type: application/octet-stream\r\n\r\n", body);
}

// ---- Options ----

TEST_F(CallTest, AccelRedirectIsAnsweredByTheCallback) {
  std::string target, type;
  options_.internal_redirect = [&](std::string_view uri, const upstream::ResponseHead& head,
                                   http::Exchange& exchange) {
    target = uri;
    type = head.header("Content-Type");
    exchange.writer().start(200).header("Content-Type", "text/plain").body("the file");
    exchange.finish();
  };
  app_.reply(send(answer("X-Accel-Redirect: /protected/report.pdf\r\n"
                         "Content-Type: application/pdf\r\n\r\nnot this")));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(ex.run());
  EXPECT_EQ(target, "/protected/report.pdf");
  EXPECT_EQ(type, "application/pdf");
  testing::ParsedResponse r = ex.response();
  EXPECT_EQ(r.body, "the file");
  EXPECT_EQ(r.head.find("X-Accel"), std::string::npos);
  // The rest of the application's output is not read: no reuse.
  EXPECT_EQ(pool_.connections(), 0u);
}

TEST_F(CallTest, TapSeesTheResponseAsRelayed) {
  TapRecord seen;
  tap_ = std::make_unique<RecordingTap>(&seen);
  app_.reply(send(answer("Status: 200 OK\r\nContent-Type: text/plain\r\nServer: php-fpm\r\n"
                         "X-Powered-By: PHP/8.3\r\n\r\ncached")));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(ex.run());
  EXPECT_EQ(seen.status, 200);
  using Field = std::pair<std::string, std::string>;
  EXPECT_EQ(seen.headers,
            (std::vector<Field>{{"Content-Type", "text/plain"}, {"X-Powered-By", "PHP/8.3"}}));
  EXPECT_EQ(seen.body, "cached");
  EXPECT_EQ(seen.ends, std::vector<bool>{true});
}

TEST_F(CallTest, TapHearsOfAClientThatLeft) {
  TapRecord seen;
  tap_ = std::make_unique<RecordingTap>(&seen);
  app_.reply(silence());
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(turn_until([&] { return app_.has_complete_request(); }));
  EXPECT_TRUE(seen.ends.empty());
  ex.disconnect();
  EXPECT_EQ(seen.ends, std::vector<bool>{false});
}

TEST_F(CallTest, TapThatWantsTheRestIsFedWhenTheClientLeavesBeforeTheHead) {
  TapRecord seen;
  seen.wants_before_head = seen.wants_after_head = true;
  tap_ = std::make_unique<RecordingTap>(&seen);
  const std::string body = pattern(100 * 1024);
  // Half a record header at once, then after a while 8 KiB a millisecond:
  // no head yet when the client goes.
  const std::string response = answer("Content-Type: text/plain\r\n\r\n" + body);
  Reply reply = trickle(std::string_view(response).substr(4), 8 * 1024);
  reply.pieces.insert(reply.pieces.begin(), response.substr(0, 4));
  reply.after_first = 300ms;
  app_.reply(reply);
  {
    MemoryExchange ex(&loop_, std::string(kGet));
    call(ex);
    ASSERT_TRUE(turn_until([&] { return app_.has_complete_request(); }));
    ex.disconnect();
    EXPECT_TRUE(ex.output().empty());
  }  // the exchange is gone: the call holds itself
  EXPECT_EQ(seen.gone_target, "/index.php?x=1");
  EXPECT_EQ(seen.status_when_gone, 0);
  ASSERT_TRUE(turn_until([&] { return !seen.ends.empty(); }));
  EXPECT_EQ(seen.status, 200);
  EXPECT_EQ(seen.body, body);
  EXPECT_EQ(seen.ends, std::vector<bool>{true});
  // Read to its end: the connection goes back to the pool.
  EXPECT_TRUE(turn_until([&] { return pool_.idle() == 1; }));
  EXPECT_EQ(app_.closes, 0);
}

TEST_F(CallTest, TapThatWantsTheRestIsFedWhenTheClientLeavesInTheBody) {
  TapRecord seen;
  seen.wants_before_head = seen.wants_after_head = true;
  tap_ = std::make_unique<RecordingTap>(&seen);
  const std::string body = pattern(1 << 20);
  app_.reply(trickle(answer("Content-Type: application/octet-stream\r\n\r\n" + body), 8 * 1024));
  MemoryExchange ex(&loop_, std::string(kGet));
  ex.set_pending_output(1 << 20);  // a client that is behind: some of the body waits in the call
  call(ex);
  ASSERT_TRUE(turn_until([&] { return !seen.body.empty(); }));
  ASSERT_TRUE(seen.ends.empty());
  ex.disconnect();
  EXPECT_EQ(seen.status_when_gone, 200);
  ASSERT_TRUE(turn_until([&] { return !seen.ends.empty(); }));
  EXPECT_EQ(seen.body, body);
  EXPECT_EQ(seen.ends, std::vector<bool>{true});
}

TEST_F(CallTest, TapThatGivesUpAfterTheClientLeftEndsTheCall) {
  TapRecord seen;
  seen.wants_before_head = true;  // and not once it has seen the head
  tap_ = std::make_unique<RecordingTap>(&seen);
  app_.reply(trickle(answer("Content-Type: text/plain\r\n\r\n" + pattern(100 * 1024)), 8 * 1024));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(turn_until([&] { return app_.has_complete_request(); }));
  ex.disconnect();
  ASSERT_TRUE(turn_until([&] { return !seen.ends.empty(); }));
  EXPECT_EQ(seen.status, 200);
  EXPECT_EQ(seen.ends, std::vector<bool>{false});
  // Mid-response: the connection cannot be reused.
  EXPECT_TRUE(turn_until([&] { return app_.closes == 1; }));
  EXPECT_EQ(pool_.connections(), 0u);
}

// ---- The client answered apart from the response (a cache's fill) ----

TEST_F(CallTest, ARangeGoesToTheClientAndTheWholeBodyToTheTap) {
  TapRecord seen;
  seen.wants_before_head = seen.wants_after_head = true;
  seen.answer = {206, 1000, 2000};
  tap_ = std::make_unique<RecordingTap>(&seen);
  const std::string body = pattern(100 * 1024);
  app_.reply(trickle(answer("Content-Type: text/plain\r\nContent-Length: 102400\r\n\r\n" + body), 8 * 1024));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  // The client has its range, whole, before the application is done.
  ASSERT_TRUE(turn_until([&] { return ex.finished(); }));
  EXPECT_TRUE(seen.ends.empty());
  testing::ParsedResponse r = ex.response();
  EXPECT_TRUE(r.head.starts_with("HTTP/1.1 206 Partial Content\r\n")) << r.head;
  EXPECT_EQ(r.header("Content-Range"), "bytes 1000-2999/102400");
  EXPECT_EQ(r.header("Content-Length"), "2000");
  EXPECT_TRUE(r.complete);
  EXPECT_TRUE(r.body == body.substr(1000, 2000)) << "the range differs";
  // The call reads on for the tap, and the connection goes back.
  ASSERT_TRUE(turn_until([&] { return !seen.ends.empty(); }));
  EXPECT_EQ(seen.status, 200);
  EXPECT_TRUE(seen.body == body) << "the tap's body differs";
  EXPECT_EQ(seen.ends, std::vector<bool>{true});
  EXPECT_TRUE(turn_until([&] { return pool_.idle() == 1; }));
  EXPECT_EQ(app_.closes, 0);
}

TEST_F(CallTest, ARangeThatIsWholeReachesAClientThatIsBehindThoughTheRestFails) {
  TapRecord seen;
  seen.wants_before_head = seen.wants_after_head = true;
  seen.answer = {206, 100, 1000};
  tap_ = std::make_unique<RecordingTap>(&seen);
  // The range comes in the first 8 KiB; then the application is gone,
  // 92 KiB short of its Content-Length.
  const std::string body = pattern(100 * 1024);
  app_.reply(send_then_close(
      records(RecordType::kStdout, "Content-Type: text/plain\r\nContent-Length: 102400\r\n\r\n" + body.substr(0, 8192),
              4096)));
  MemoryExchange ex(&loop_, std::string(kGet));
  ex.set_pending_output(1 << 20);  // the range waits in the call for the client
  call(ex);
  ASSERT_TRUE(ex.run());
  EXPECT_TRUE(ex.finished());
  EXPECT_FALSE(ex.aborted());
  testing::ParsedResponse r = ex.response();
  EXPECT_TRUE(r.head.starts_with("HTTP/1.1 206 Partial Content\r\n")) << r.head;
  EXPECT_TRUE(r.body == body.substr(100, 1000)) << "the range differs";
  ASSERT_TRUE(turn_until([&] { return !seen.ends.empty(); }));
  EXPECT_EQ(seen.ends, std::vector<bool>{false});  // the tap saw the response cut short
}

TEST_F(CallTest, ANotModifiedGoesToTheClientAndTheWholeBodyToTheTap) {
  TapRecord seen;
  seen.wants_before_head = seen.wants_after_head = true;
  seen.answer = {304};
  tap_ = std::make_unique<RecordingTap>(&seen);
  const std::string body = pattern(64 * 1024);
  app_.reply(trickle(answer("Content-Type: text/plain\r\nETag: \"a\"\r\n\r\n" + body), 8 * 1024));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(turn_until([&] { return ex.finished(); }));
  testing::ParsedResponse r = ex.response();
  EXPECT_TRUE(r.head.starts_with("HTTP/1.1 304 Not Modified\r\n")) << r.head;
  EXPECT_EQ(r.header("ETag"), "\"a\"");
  EXPECT_EQ(r.header("Content-Type"), "");
  EXPECT_TRUE(r.body.empty());
  ASSERT_TRUE(turn_until([&] { return !seen.ends.empty(); }));
  EXPECT_TRUE(seen.body == body) << "the tap's body differs";
  EXPECT_EQ(seen.ends, std::vector<bool>{true});
  EXPECT_TRUE(turn_until([&] { return pool_.idle() == 1; }));
}

TEST_F(CallTest, APreconditionFailedEndsTheCallWhenTheTapWantsNothingMore) {
  TapRecord seen;
  seen.wants_before_head = true;  // and not once it has seen the head
  seen.answer = {412};
  tap_ = std::make_unique<RecordingTap>(&seen);
  app_.reply(trickle(answer("Content-Type: text/plain\r\n\r\n" + pattern(100 * 1024)), 8 * 1024));
  MemoryExchange ex(&loop_, std::string(kGet));
  call(ex);
  ASSERT_TRUE(turn_until([&] { return ex.finished(); }));
  EXPECT_TRUE(ex.response().head.starts_with("HTTP/1.1 412 ")) << ex.response().head;
  EXPECT_EQ(seen.ends, std::vector<bool>{false});
  EXPECT_TRUE(turn_until([&] { return app_.closes == 1; }));
  EXPECT_EQ(pool_.connections(), 0u);
}

}  // namespace
}  // namespace tern::fastcgi
