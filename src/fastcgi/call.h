// Call: one HTTP request relayed to a FastCGI application (php-fpm) over a
// pooled connection, and its response relayed back.
//
//   Call::start(exchange, pool, options, write_params, tap);
//
// The request: BEGIN_REQUEST and PARAMS (written by `write_params`), then the
// body as STDIN records. With request buffering (the default, as nginx's
// fastcgi_request_buffering) the whole body is received first, in memory up
// to request_memory and beyond it in an unlinked temp file, and only then
// is a connection taken from the pool: a client that uploads slowly holds a
// descriptor and some page cache, never one of the application's workers.
// Without it a body of known length streams through as it arrives, pausing
// the client when the upstream falls behind; a chunked body is always
// gathered first, because PHP reads exactly CONTENT_LENGTH bytes and so has
// to be told it up front.
//
// The response: STDOUT starts with a CGI head (Status, Location, fields),
// which becomes the HTTP response head; the rest goes to the client, with
// Content-Length when the application gave one, else chunked. With response
// buffering (the default, as nginx's fastcgi_buffering) the application's
// output is read as fast as it comes: what the client cannot take yet waits
// in memory up to response_memory and then in a temp file (up to
// max_temp_file, after which reading pauses), and the connection goes back
// to the pool at END_REQUEST, while the client is still downloading. A
// response with "X-Accel-Buffering: no" (a stream of events, say) and blocks
// with buffering off are relayed as they come instead, reading from the
// upstream paused while the client is behind. STDERR goes to the error log
// line by line. The connection is reused when the exchange on it ended
// cleanly (FCGI_KEEP_CONN).
//
// X-Accel-Redirect (with CallOptions::internal_redirect): the server
// answers with what the URI names instead, as nginx does for a download a
// script has authorised.
//
// Fields that describe the CGI hop or the application's server (Connection,
// Transfer-Encoding, Content-Length, Date, Server) and internal directives
// (X-Accel-*, X-Sendfile) are not relayed. A 1xx status is not a response
// a client can be given: it is a 502.
//
// Failures: no connection (refused, down, connect timeout) -> 502; every
// pooled connection busy for too long -> 503; no response within
// read_timeout -> 504; a bad response head -> 502; a temp file that cannot
// be written -> 500. After the head was sent only closing the client's
// connection can tell it the body is incomplete: what arrived is sent, then
// the connection closes. A request whose pooled connection turns out closed
// before any answer (a worker recycled) is tried once more on a new
// connection, if it has no body or its body was buffered; a connection
// opened for the request that closes unanswered is a 502 (the application
// may have run it).
//
// The exchange owns its Call (http::ExchangeJob) and destroys it after the
// round in which the exchange ends: when the response has been relayed, or
// when the client goes away. Loop thread only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/spool.h"
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
  bool request_buffering = true;
  bool response_buffering = true;
  size_t request_memory = 16 * 1024;   // of a buffered body, before a temp file
  size_t response_memory = 64 * 1024;  // of a buffered response, before a temp file
  uint64_t max_temp_file = uint64_t{1} << 30;  // of a buffered response
  std::string_view temp_dir = "/tmp";
  // Set: a response head with "X-Accel-Redirect: /uri" is not relayed;
  // this answers the exchange instead (and finishes it), given the URI and
  // the application's head. The rest of the application's output is not
  // read: its connection is closed.
  std::function<void(std::string_view uri, const CgiHeadParser& head, http::Exchange& exchange)>
      internal_redirect;
};

// Sees the response a Call relays (a cache filling an entry, say).
class ResponseTap {
 public:
  virtual ~ResponseTap() = default;
  // The status and the fields exactly as relayed to the client.
  virtual void on_head(int status, std::span<const http::Header> headers) = 0;
  virtual void on_body(std::string_view piece) = 0;
  // complete: the whole response reached the client's connection.
  virtual void on_end(bool complete) = 0;
};

// Writes BEGIN_REQUEST and the PARAMS stream (request id 1, keep_conn) into
// `out`; `content_length` is set when the body was gathered first, once its
// length is known.
using RequestHeadWriter = std::function<void(net::Buffer& out, std::optional<uint64_t> content_length)>;

// Whether a field of a CGI response head stays between the application and
// the server (see above).
bool is_unrelayed_field(std::string_view name);

class Call final : public http::ExchangeJob, private net::ConnectionPool::User {
 public:
  static void start(http::Exchange& exchange, net::ConnectionPool& pool, const CallOptions& options,
                    RequestHeadWriter head_writer, std::unique_ptr<ResponseTap> tap);

 private:
  Call(http::Exchange& exchange, net::ConnectionPool& pool, const CallOptions& options,
       RequestHeadWriter head_writer, std::unique_ptr<ResponseTap> tap);

 public:
  // Lets go of the pool and timers if the call never ended (its exchange
  // went with its loop).
  ~Call() override { done(); }

 private:

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

  void send_request();
  void pump_body();
  bool on_stdout(std::string_view data);
  bool write_response_head();
  bool relay(std::string_view data);
  bool pump_response();
  void pause_upstream();
  void resume_upstream();
  void on_stderr(std::string_view data, bool flush);
  void on_end_request(const Event& event, const net::Buffer& input);
  void end_response();
  void arm_read_timer();
  void on_read_timeout();
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
  Spool body_;              // a buffered request body
  uint64_t body_sent_ = 0;  // of body_, written as STDIN
  Spool response_;          // response bytes the client has not taken yet
  uint64_t response_sent_ = 0;
  std::string scratch_;     // for reading the spools
  RecordParser records_;
  CgiHeadParser head_;
  std::string stderr_line_;
  std::vector<http::Header> relayed_;  // the head's relayed fields, for the tap
  net::TimerId read_timer_;
  bool buffer_body_ = false;      // the body is gathered before a connection is taken
  bool buffer_response_ = false;  // this response is read ahead of the client
  bool replayable_ = false;       // no body, or a buffered one: can be sent again
  bool stale_possible_ = false;   // the connection had served other requests
  bool head_written_ = false;     // BEGIN_REQUEST and PARAMS are in pending_ or sent
  bool stdin_done_ = false;       // the empty STDIN record is written
  bool response_started_ = false;
  bool upstream_done_ = false;    // END_REQUEST arrived; the connection went back
  bool answered_ = false;         // upstream bytes arrived
  bool retried_ = false;
  bool done_ = false;
};

}  // namespace tern::fastcgi
