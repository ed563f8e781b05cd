// Test support: an Exchange carried in memory. The request is given as
// bytes and parsed by the real parser; the handler under test gets it as an
// Exchange whose response goes, as HTTP/1 bytes, into memory; the body that
// followed the head (a Content-Length body) is delivered as a client would send it (in pieces of a
// chosen size, holding back while the handler has paused it). Handlers that
// answer later (an upstream, a task thread) run on the test's own loop:
// run() turns it until the exchange ends. No client socket anywhere.
//
//   net::EventLoop loop;
//   testing::MemoryExchange ex(&loop, "POST /x HTTP/1.1\r\nHost: a\r\n"
//                                     "Content-Length: 3\r\n\r\nabc");
//   ex.start(handler);
//   ASSERT_TRUE(ex.run());
//   EXPECT_EQ(ex.response().status, 200);
//
// Loop thread (the test's) only.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "http/exchange.h"
#include "http1/http1_output.h"
#include "http1/request_parser.h"
#include "net/event_loop.h"
#include "net/inet_address.h"
#include "support/memory_output.h"

namespace tern::testing {

// A response read back from HTTP/1 bytes (chunked bodies decoded).
struct ParsedResponse {
  int status = 0;
  std::string head;  // the status line and fields, each ending in CRLF
  std::string body;
  bool complete = false;  // the whole head and body framing arrived

  std::string header(std::string_view name) const {
    const std::string needle = "\r\n" + std::string(name) + ": ";
    const size_t at = head.find(needle);
    if (at == std::string::npos) return "";
    const size_t start = at + needle.size();
    return head.substr(start, head.find("\r\n", start) - start);
  }

  static ParsedResponse parse(const std::string& bytes) {
    ParsedResponse r;
    const size_t end = bytes.find("\r\n\r\n");
    if (bytes.size() < 12 || end == std::string::npos) return r;
    r.status = std::stoi(bytes.substr(9, 3));
    r.head = bytes.substr(0, end + 2);
    std::string rest = bytes.substr(end + 4);
    if (r.head.find("\r\nTransfer-Encoding: chunked\r\n") == std::string::npos) {
      r.body = std::move(rest);
      r.complete = true;
      return r;
    }
    size_t at = 0;
    for (;;) {
      const size_t line = rest.find("\r\n", at);
      if (line == std::string::npos) return r;
      const size_t size = std::stoul(rest.substr(at, line - at), nullptr, 16);
      if (size == 0) {
        r.complete = rest.compare(line, 4, "\r\n\r\n") == 0;
        return r;
      }
      if (line + 2 + size + 2 > rest.size()) return r;
      r.body += rest.substr(line + 2, size);
      at = line + 2 + size + 2;
    }
  }
};

class MemoryExchange final : public http::ExchangeTransport {
 public:
  MemoryExchange(net::EventLoop* loop, std::string raw, std::string_view peer = "127.0.0.1",
                 uint16_t peer_port = 40000)
      : loop_(loop),
        raw_(std::move(raw)),
        peer_(net::InetAddress::from_ip_port(std::string(peer), peer_port).value()),
        local_(net::InetAddress::from_ip_port("127.0.0.1", 80).value()) {
    parsed_ = parser_.parse(raw_, &request_) == http::ParseStatus::kComplete;
    if (parsed_) body_ = std::string_view(raw_).substr(request_.head_size());
  }
  ~MemoryExchange() {
    // A handler still waiting is told the client left, as on a real close.
    if (exchange_.active()) exchange_.cancel();
  }
  MemoryExchange(const MemoryExchange&) = delete;
  MemoryExchange& operator=(const MemoryExchange&) = delete;

  bool parsed() const { return parsed_; }
  http::Request& request() { return request_; }
  http::Exchange& exchange() { return exchange_; }

  // The body reaches the handler in pieces of at most this size (before start()).
  void set_body_piece(size_t bytes) { piece_ = bytes; }
  // Output the "client" has not taken yet (a slow reader); wait_for_drain()
  // takes it all on the next round.
  void set_pending_output(size_t bytes) { pending_ = bytes; }

  // Begins the exchange and runs `handler` on it, then sends the body.
  void start(const http::ExchangeHandler& handler) {
    http::ResponseWriter::Context context;
    http1_.begin(&memory_, request_.version());
    context.stream = &http1_;
    context.head_only = request_.method() == http::Method::kHead;
    context.keep_alive = request_.keep_alive();
    context.date = "Sun, 06 Nov 1994 08:49:37 GMT";
    context.server = "tern";
    const bool has_body = !body_.empty();
    exchange_.begin(this, &request_, context, has_body);
    handler(exchange_);
    send_body();
  }

  // Turns the loop until the exchange has ended (true) or `limit` passed.
  bool run(std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    if (done_) return true;
    waiting_ = true;
    const net::TimerId timer = loop_->run_after(limit, [this] { loop_->quit(); });
    loop_->loop();
    loop_->cancel(timer);
    waiting_ = false;
    return done_;
  }

  // The client goes away: the exchange's abort handler runs.
  void disconnect() {
    if (exchange_.active()) exchange_.cancel();
    end();
  }

  bool finished() const { return finished_; }  // finish()
  bool aborted() const { return aborted_; }     // abort()
  bool paused() const { return exchange_.body_paused(); }
  size_t flushes() const { return flushes_; }
  // The response bytes so far.
  const std::string& output() {
    bytes_ += memory_.take();
    return bytes_;
  }
  ParsedResponse response() { return ParsedResponse::parse(output()); }

  // ExchangeTransport
  net::EventLoop* loop() const override { return loop_; }
  const net::InetAddress& peer_address() const override { return peer_; }
  const net::InetAddress& local_address() const override { return local_; }
  bool must_close() const override { return false; }
  void flush() override { ++flushes_; }
  size_t pending_output_bytes() const override { return pending_; }
  void pause_body() override {}
  void resume_body() override {
    later([this] { send_body(); });
  }
  void wait_for_drain() override {
    later([this] {
      pending_ = 0;
      if (exchange_.active()) exchange_.drained();
    });
  }
  void finish_exchange() override {
    finished_ = true;
    end();
  }
  void abort_exchange() override {
    aborted_ = true;
    end();
  }

 private:
  void send_body() {
    while (exchange_.active() && !exchange_.body_complete() && !exchange_.body_paused()) {
      const std::string_view piece = body_.substr(sent_, piece_);
      sent_ += piece.size();
      exchange_.deliver(piece, sent_ == body_.size());
    }
  }
  // Runs `f` on the loop's next round, unless this harness is gone by then.
  template <typename F>
  void later(F f) {
    loop_->queue_in_loop([alive = std::weak_ptr<int>(alive_), f = std::move(f)] {
      if (alive.lock()) f();
    });
  }
  void end() {
    exchange_.end();
    done_ = true;
    if (waiting_) loop_->quit();
  }

  net::EventLoop* const loop_;
  const std::string raw_;
  net::InetAddress peer_;
  net::InetAddress local_;
  http::RequestParser parser_;
  http::Request request_;
  bool parsed_ = false;
  std::string_view body_;  // what followed the head in raw_
  size_t sent_ = 0;
  size_t piece_ = 64 * 1024;
  size_t pending_ = 0;
  size_t flushes_ = 0;
  MemoryOutput memory_;
  http::Http1Output http1_;
  std::string bytes_;
  http::Exchange exchange_;
  bool done_ = false;
  bool waiting_ = false;
  bool finished_ = false;
  bool aborted_ = false;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // for later()
};

}  // namespace tern::testing
