// Call: one HTTP request relayed to a FastCGI application (php-fpm) over a
// pooled connection, and its response relayed back, both ways streaming.
//
//   Call::start(exchange, pool, options, write_params, tap);
//
// The request: BEGIN_REQUEST and PARAMS (written by `write_params`), then the
// body as STDIN records as it arrives from the client. A body of known
// length streams through in bounded memory: when the upstream does not keep
// up, the client's body is paused. A chunked body is gathered first (up to
// the server's body limit), as nginx does, because PHP reads exactly
// CONTENT_LENGTH bytes and so has to be told it up front.
//
// The response: STDOUT starts with a CGI head (Status, Location, fields),
// which becomes the HTTP response head; the rest streams to the client,
// with Content-Length when the application gave one, else chunked. When the
// client is slow, reading from the upstream pauses until it catches up, so
// a large response never piles up in memory. STDERR goes to the error log
// line by line. END_REQUEST ends the response; the connection goes back to
// the pool when the exchange on it ended cleanly (FCGI_KEEP_CONN).
//
// Failures: no connection (refused, down, connect timeout) -> 502; every
// pooled connection busy for too long -> 503; no response within
// read_timeout -> 504; a bad response head -> 502. After the head was sent
// only closing the client's connection can tell it the body is incomplete,
// and so it does. A request without a body that finds its pooled connection
// closed before any answer is tried once more on a new connection.
//
// A Call owns itself: it ends when the response has been relayed, or when
// the client goes away. Loop thread only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "fastcgi/cgi_response.h"
#include "fastcgi/protocol.h"
#include "http/exchange.h"
#include "net/buffer.h"
#include "net/connection_pool.h"
#include "net/timer_wheel.h"

namespace tern::fastcgi {

struct CallOptions {
  std::chrono::milliseconds read_timeout{30000};
  // Added to every relayed response (the response cache's "X-Cache: MISS").
  std::string_view extra_header_name;
  std::string_view extra_header_value;
  std::string_view log_name = "fastcgi";  // the upstream, for log lines
};

// Sees the response a Call relays (a cache filling an entry, say).
class ResponseTap {
 public:
  virtual ~ResponseTap() = default;
  virtual void on_head(int status, std::span<const http::Header> headers) = 0;
  virtual void on_body(std::string_view piece) = 0;
  // complete: the whole response reached the client's connection.
  virtual void on_end(bool complete) = 0;
};

// Writes BEGIN_REQUEST and the PARAMS stream (request id 1, keep_conn) into
// `out`; `content_length` is set for a chunked body, once it is known.
using RequestHeadWriter = std::function<void(net::Buffer& out, std::optional<uint64_t> content_length)>;

class Call final : private net::ConnectionPool::User {
 public:
  static void start(http::Exchange& exchange, net::ConnectionPool& pool, const CallOptions& options,
                    RequestHeadWriter head_writer, std::unique_ptr<ResponseTap> tap);

 private:
  Call(http::Exchange& exchange, net::ConnectionPool& pool, const CallOptions& options,
       RequestHeadWriter head_writer, std::unique_ptr<ResponseTap> tap);
  ~Call() override = default;

  void begin();
  // Client side.
  void on_body(std::string_view piece, bool last);
  void on_client_drained();
  void on_client_gone();
  // Upstream side (ConnectionPool::User).
  void on_lease(net::TcpConnection& conn) override;
  void on_lease_failed(net::ConnectionPool::Failure failure, std::string_view why) override;
  void on_upstream_message(net::TcpConnection& conn, net::Buffer& input) override;
  void on_upstream_drained(net::TcpConnection& conn) override;
  void on_upstream_closed(net::TcpConnection& conn) override;

  bool on_stdout(std::string_view data);
  void write_response_head();
  void on_stderr(std::string_view data, bool flush);
  void on_end_request(const Event& event, const net::Buffer& input);
  void on_read_timeout();
  void send_pending();
  // Answers `status` if nothing was sent yet, else cuts the client off.
  void fail(int status, std::string_view why);
  void done();

  http::Exchange* exchange_;  // null once the client has gone
  net::ConnectionPool& pool_;
  const CallOptions options_;
  RequestHeadWriter head_writer_;
  std::unique_ptr<ResponseTap> tap_;
  net::EventLoop* const loop_;
  net::TcpConnection* upstream_ = nullptr;  // while leased
  net::Buffer pending_{0};  // request records waiting for a connection
  RecordParser records_;
  CgiHeadParser head_;
  std::string stderr_line_;
  net::TimerId read_timer_;
  uint64_t chunked_bytes_ = 0;
  bool chunked_ = false;       // the body is gathered before PARAMS go out
  bool head_written_ = false;  // BEGIN_REQUEST and PARAMS are in pending_ or sent
  bool stdin_done_ = false;    // the empty STDIN record is written
  bool response_started_ = false;
  bool answered_ = false;      // upstream bytes arrived
  bool retried_ = false;
  bool done_ = false;
};

}  // namespace tern::fastcgi
