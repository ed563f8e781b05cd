// Http1Connection: the HTTP/1.x protocol on one TcpConnection.
//
// It feeds received bytes to a RequestParser, asks the server's handler
// chain (handler.h) which handler answers each complete head, reads the
// body (Content-Length or chunked, bounded) when that handler wants it,
// gives it a ResponseWriter on an Http1Output into the connection's output,
// and answers every request of a pipelined batch before flushing them all
// with one write. Protocol errors get their status and a close;
// whenever the framing of what follows is in doubt, the connection closes.
//
// A handler may also take a request as an Exchange (exchange.h) when its
// head is complete; the body then streams to it, and the connection waits
// for the exchange to finish before it reads the next request. An exchange
// that answers before the body is in (a 405, a 413) leaves the rest of the
// body to be read and dropped, after which the connection goes on.
//
// Memory per connection is bounded whatever the client does:
//   - the head by the parser's limits (431);
//   - a body for a Router handler by the body limit (413), and in memory
//     only up to body_buffer_bytes: past that it waits in an unlinked temp
//     file (base/spool.h), mapped when the handler runs; chunked framing is
//     dropped as it is decoded;
//   - output: a pipelined request is not parsed while the responses queued
//     before it exceed kOutputHighWater; reading stops until the client has
//     taken them (a client that pipelines and never reads holds that much);
//   - behind an exchange, unread input above the head limit stops reading.
//
// Timeouts, all on one timer: keep-alive idle time before a request starts;
// the whole header section once its first byte arrived (408); progress while
// reading a body (408); progress of the output while a response is queued
// (close; bytes the client sends meanwhile do not count).
//
// Owned by HttpServer's per-loop pool (recycled after close); the
// TcpConnection's context slot points to it. Loop thread only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "http/error_page.h"
#include "http/exchange.h"
#include "http/handler.h"
#include "http/http_connection.h"
#include "http/http_limits.h"
#include "http/request.h"
#include "http/response_writer.h"
#include "http1/http1_output.h"
#include "http1/request_state.h"
#include "net/callbacks.h"
#include "net/timeout.h"

namespace tern::net {
class Buffer;
class TcpConnection;
}  // namespace tern::net

namespace tern::http {

class Http1Connection final : public ExchangeTransport, public HttpConnection {
 public:
  explicit Http1Connection(const HttpShared* shared)
      : HttpConnection(/*http1=*/true), shared_(shared), timeout_(&Http1Connection::timed_out, this) {}
  Http1Connection(const Http1Connection&) = delete;
  Http1Connection& operator=(const Http1Connection&) = delete;

  // h2c_address: the connection came in on an address that also takes
  // HTTP/2 by prior knowledge, where a first line that is no HTTP/1 request
  // line is a bad HTTP/2 preface: it ends the connection without an HTTP/1
  // answer (RFC 9113 3.4), which the peer would read as frames.
  void attach(net::TcpConnection* conn, bool h2c_address = false);
  void on_message(net::Buffer& input) override;
  void on_close() override;
  // Asked for by an Exchange, or by the graceful stop.
  void on_write_complete() override;
  // Graceful stop: a keep-alive connection between requests is closed after
  // a short grace, unless a request comes (answered, then closed).
  void close_if_idle() override;
  Phase phase() const override;

 private:
  // ExchangeTransport: what an exchange asks of the connection.
  net::EventLoop* loop() const override;
  const net::InetAddress& peer_address() const override;
  const net::InetAddress& connection_client() const override;
  const net::InetAddress& local_address() const override;
  const net::SecureLayer* secure() const override;
  bool must_close() const override;
  void flush() override;
  size_t pending_output_bytes() const override;
  void pause_body() override;
  void resume_body() override;
  void wait_for_drain() override;
  void finish_exchange() override;
  void abort_exchange() override;
  bool switch_protocols() override;
  void write_raw(std::string_view bytes) override;

  // kBody: reading a body for a Router handler; kStreamBody: passing a body
  // to an Exchange; kAwait: the Exchange has the whole request; kDiscard:
  // dropping the rest of a body whose response went out already; kTunnel:
  // raw bytes both ways after a 101 (Exchange::switch_protocols).
  enum class State : uint8_t { kHead, kBody, kStreamBody, kAwait, kDiscard, kTunnel, kClosing };

  // Queued output above which no further pipelined request is parsed.
  static constexpr size_t kOutputHighWater = 64 * 1024;

  static bool names_http1(std::string_view input);
  void begin_request();
  void end_request();
  bool parse_head(net::Buffer& input);
  bool start_request(net::Buffer& input);
  bool begin_body(net::Buffer& input);
  bool read_body(net::Buffer& input);
  bool spool_body(net::Buffer& input, bool* complete);
  void detach_head(net::Buffer& input);
  void dispatch(net::Buffer& input);
  void begin_exchange(net::Buffer& input);
  // The body limit of this request (413 for a Content-Length above it), and
  // the chunked decoder set up for it. False when answered 413.
  bool limit_body(uint64_t max_body);
  bool stream_body(net::Buffer& input);
  bool discard_body(net::Buffer& input);
  bool can_discard_body() const;
  void fail_exchange(int status, std::string_view log_reason);
  void resume_later();
  void wait_for_output();
  // keep_alive: go on to the next request; otherwise close, lingering when
  // the client may still be sending (see start_closing).
  void next_request(bool keep_alive, bool more_input_expected = false);
  // Answers `status` with an error page and closes. `parsed`: the head of
  // the request being answered is whole (logged and counted as itself,
  // else as an empty request).
  void fail(int status, std::string_view log_reason, bool parsed = false);
  void send_continue();
  // An exchange's body is to come, announced with 100-continue, and none of
  // it has: the client waits for 100 Continue.
  bool wants_continue(const net::Buffer& input) const;
  void start_closing(bool more_input_expected);
  void arm_timer(std::chrono::milliseconds delay);
  void on_timer();
  static void timed_out(void* self) { static_cast<Http1Connection*>(self)->on_timer(); }
  // Begins the next response on output_.
  ResponseWriter::Context writer_context(bool keep_alive);
  bool output_backlogged() const;
  // The exchange in progress lives in the request state (idle connections
  // hold neither); valid while req_ is set.
  Exchange& exchange() { return req_->exchange; }
  bool exchange_active() const { return req_ != nullptr && req_->exchange.active(); }

  // What a keep-alive request touches comes first; the small fields fill
  // what the bases leave of their last word.
  State state_ = State::kHead;
  bool request_started_ : 1 = false;   // a byte of the next request has arrived
  bool continue_sent_ : 1 = false;
  bool in_message_ : 1 = false;        // inside on_message()
  bool head_timer_armed_ : 1 = false;  // header_timeout runs for the head under way
  bool body_spooled_ : 1 = false;      // head and body left the input (RequestState::body)
  bool output_paused_ : 1 = false;     // waiting for queued output to drain (kOutputHighWater)
  bool drain_when_written_ : 1 = false;  // graceful stop: idle once the queued output is out
  bool h2c_first_ : 1 = false;         // the first request on an address that also takes h2c
  // The low 32 bits of the bytes sent and received when the timer was
  // armed: progress is any change, and exactly 4 GiB between two timer
  // checks is the only change they miss.
  uint32_t sent_mark_ = 0;
  uint32_t received_mark_ = 0;
  const HttpShared* const shared_;
  net::TcpConnection* conn_ = nullptr;
  std::unique_ptr<RequestState> req_;  // from the pool while a request is in progress
  net::Timeout timeout_;          // the one timer (see above); arm() uses its first 16 bytes
  Http1Output output_;            // the response under way, as HTTP/1 on conn_
};

}  // namespace tern::http
