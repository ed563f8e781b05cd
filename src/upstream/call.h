// Call: one HTTP request relayed to an upstream server over a pooled
// connection, and its response relayed back: the part of FastCGI
// (fastcgi/relay.h) and of the reverse proxy (proxy/http_codec.h) that does
// not depend on the protocol spoken to the upstream, which a Codec does.
//
//   Call::start<MyCodec>(exchange, upstream, options, std::move(tap), codec_args...);
//
// The request: the codec's head, then the body. With request buffering
// (the default, as nginx's *_request_buffering) the whole body is received
// first, in memory up to request_memory and beyond it in an unlinked temp
// file, and only then is a connection taken from the pool: a client that
// uploads slowly holds a descriptor and some page cache, never one of the
// application's workers. Without it a body of known length streams through
// as it arrives, pausing the client when the upstream falls behind; a
// chunked body is always gathered first (its length is sent up front).
//
// The response: the codec turns the upstream's bytes into a head, which
// becomes the HTTP response head, and body pieces, which go to the client
// with Content-Length when the upstream gave one, else chunked. With
// response buffering (the default, as nginx's *_buffering) the upstream's
// output is read as fast as it comes: what the client cannot take yet waits
// in memory up to response_memory and then in a temp file (up to
// max_temp_file, after which reading pauses), and the connection goes back
// to the pool at the end of the response, while the client is still
// downloading. A response with "X-Accel-Buffering: no" (a stream of events,
// say) and calls with buffering off are relayed as they come instead,
// reading from the upstream paused while the client is behind.
//
// A protocol switch (a WebSocket): when the codec reads a 101 the request
// asked for, the 101 goes to the client and both connections carry raw
// bytes from then on, each side paused while the other is behind, until
// either closes or nothing moves either way for read_timeout.
//
// X-Accel-Redirect (with CallOptions::internal_redirect): the server
// answers with what the URI names instead, as nginx does for a download a
// script has authorised.
//
// Fields that describe the hop or the upstream server (Connection,
// Transfer-Encoding, Content-Length, Date, Server, those the codec names)
// and internal directives (X-Accel-*, X-Sendfile) are not relayed. A 1xx
// status is not a response a client can be given: it is a 502.
//
// Failures: no connection (refused, down, connect timeout) -> 502; every
// pooled connection busy for too long -> 503; a request the upstream does
// not take within send_timeout, or no response within read_timeout -> 504; a bad response head -> 502; a temp file that cannot
// be written -> 500. After the head was sent only closing the client's
// connection can tell it the body is incomplete: what arrived is sent, then
// the connection closes.
//
// Retries: a request whose pooled connection turns out closed before any
// answer (the upstream closed it while idle) is tried once more on a new
// connection to the same server, if it has no body or its body was
// buffered. With CallOptions::next_server (the proxy), a failed attempt
// moves to another server of the group: always when no connection could be
// made (the request never left), and for an idempotent request also when
// the connection closed (next_on_error) or timed out (next_on_timeout)
// before a response head, or the head has one of next_on_status (502,
// 503, 504, 429: not relayed, its connection closed); never for a POST
// that reached its server unless next_non_idempotent. Attempts are bounded
// by max_tries and by next_server_timeout from the first. Each server's outcome goes to its
// group's passive health (upstream/group.h).
//
// A client that goes away ends its call, and the upstream's connection
// goes, unless the call's tap still wants the response (a cache filling
// its entry): then the call reads on for the tap alone, as nginx does for
// a cacheable response, so that the requests waiting for that fill are
// answered from the entry rather than all sent to the upstream. That takes
// a request whose body went out whole or was buffered, and ends as soon as
// the tap gives up (a response it may not store, one too large); the
// timeouts bound it as they bound any call. A request without a body is
// kept as it was sent, so that such a call still retries as above (a
// server that fails it, another of the group) with the client gone.
//
// The exchange owns its Call (http::ExchangeJob) and destroys it after the
// round in which the exchange ends: when the response has been relayed, or
// when the client goes away. A call that reads on for its tap holds itself,
// and the configuration its exchange kept, until it ends. Loop thread only.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <list>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/spool.h"
#include "http/exchange.h"
#include "http1/response_parser.h"
#include "net/buffer.h"
#include "net/connection_pool.h"
#include "net/timer_wheel.h"

namespace tern::upstream {

class Group;

// A response head as the codec read it. Views valid during the callback
// that sees it.
struct ResponseHead {
  int status = 0;
  std::string_view reason;
  std::span<const http::Header> headers;
  std::optional<uint64_t> content_length;
  // The first field with this name (case-insensitive), or "".
  std::string_view header(std::string_view name) const;
};

// The protocol spoken to the upstream: writes the request, reads the
// response. One per call; it may be asked for several attempts (reset()).
class Codec {
 public:
  struct Event {
    enum Kind : uint8_t {
      kNeedMore,  // all of the input is used or kept: wait for more
      kHead,      // head() is ready
      kBody,      // `data` is body
      kEnd,       // the response is complete
      kError,     // see error() and error_status()
    };
    Kind kind = kNeedMore;
    std::string_view data;
  };

  virtual ~Codec() = default;
  // The request head; `content_length` is set when the body was gathered
  // first, once its length is known (else the request's own framing holds).
  virtual void write_head(net::Buffer& out, std::optional<uint64_t> content_length) = 0;
  // A piece of the body, and its end (`last`, with a piece or empty).
  virtual void write_body(net::Buffer& out, std::string_view piece, bool last) = 0;
  // Starts reading a response afresh (every attempt).
  virtual void reset() = 0;
  // Consumes what it can of `input`; a view in the event stays valid until
  // the next read on the connection.
  virtual Event next(net::Buffer& input) = 0;
  // After kHead.
  virtual const ResponseHead& head() const = 0;
  // After kEnd: the connection may serve another request.
  virtual bool reusable() const = 0;
  // The upstream closed: whether that ends the response (a body that runs
  // until the close) rather than cutting it short.
  virtual bool ends_at_close() const { return false; }
  // After kHead: the head is a 101 the request asked for (a WebSocket):
  // the connection becomes a tunnel.
  virtual bool upgraded() const { return false; }
  // A field of the response head that stays on the upstream's hop, beside
  // those every call drops (is_unrelayed_field).
  virtual bool hop_field(std::string_view /*name*/) const { return false; }
  // After kError: why, and the status to answer (502; 503 for an
  // application that says it is overloaded).
  virtual std::string_view error() const = 0;
  virtual int error_status() const { return 502; }
};

struct CallOptions {
  // From the request's last byte written, for the response's first byte,
  // and then between two reads.
  std::chrono::milliseconds read_timeout{30000};
  // While the request is being written, between two steps of progress;
  // 0: read_timeout.
  std::chrono::milliseconds send_timeout{0};
  // Added to every relayed response (the response cache's "X-Cache: MISS").
  std::string_view extra_header_name;
  std::string_view extra_header_value;
  std::string_view log_name = "upstream";  // for log lines
  bool request_buffering = true;
  bool response_buffering = true;
  size_t request_memory = 16 * 1024;   // of a buffered body, before a temp file
  size_t response_memory = 64 * 1024;  // of a buffered response, before a temp file
  uint64_t max_temp_file = uint64_t{1} << 30;  // of a buffered response
  std::string_view temp_dir = "/tmp";
  // The response head's bounds (beyond them: 502).
  http::ResponseParser::Limits response_head;
  // The key a hashing group places the request by.
  std::string hash_key;
  // The client and the address it came to, for a group whose connections
  // begin with a PROXY protocol header (GroupServer::proxy_protocol).
  std::optional<net::ProxyHeader> proxy_client;
  // A failed attempt goes on to another server (see above): on no
  // connection; on a connection closed, a timeout, those statuses.
  bool next_server = false;
  bool next_on_error = true;
  bool next_on_timeout = true;
  std::span<const int> next_on_status;  // not owned: outlives the call
  bool next_non_idempotent = false;
  unsigned max_tries = 0;  // 0: each server once
  std::chrono::milliseconds next_server_timeout{0};  // 0: no bound but tries
  // A Location or Refresh of the response that starts with `from` gets
  // `to` in its place (the proxy's redirect rewriting); empty: none.
  std::string_view rewrite_from;
  std::string_view rewrite_to;
  // Set: a response head with "X-Accel-Redirect: /uri" is not relayed;
  // this answers the exchange instead (and finishes it), given the URI and
  // the upstream's head. The rest of the upstream's output is not read:
  // its connection is closed.
  std::function<void(std::string_view uri, const ResponseHead& head, http::Exchange& exchange)>
      internal_redirect;
};

// Sees the response a Call relays (a cache filling an entry, say).
class ResponseTap {
 public:
  virtual ~ResponseTap() = default;
  // The status and the fields exactly as relayed to the client, then the
  // upstream's Date and X-Accel-Expires, which are not relayed but say how
  // fresh the response is (a cache's to read, not to store).
  virtual void on_head(int status, std::span<const http::Header> headers) = 0;
  virtual void on_body(std::string_view piece) = 0;
  // complete: the whole response came from the upstream (called as soon
  // as it has, while the client may still be taking it); not complete:
  // the upstream or the client failed first.
  virtual void on_end(bool complete) = 0;
  // Before the call relays a response head (`fields` those it would relay,
  // then the upstream's Date and X-Accel-Expires, as on_head() sees them),
  // or answers a failure of its own (`failure`, no fields: 502 no
  // connection or a bad response, 503 every connection busy, 504 a
  // timeout): the tap may write the exchange's response itself instead (a
  // cache with its stored response: a revalidation's 304, an application
  // that is down) and return true, leaving the exchange unfinished. The
  // call then finishes it and ends; nothing more of the upstream's is read
  // (on_end(false) follows).
  // When the client has gone (the call reads on for the tap), `exchange`
  // is null: true ends the call, with the tap's work done (a
  // revalidation's 304 refreshed its entry) or nothing to do (a failure a
  // stale entry would have answered: the entry stays).
  virtual bool answer_instead(http::Exchange* /*exchange*/, int /*status*/,
                              std::span<const http::Header> /*fields*/, bool /*failure*/) {
    return false;
  }
  // How the client is answered from a response the call relays (a
  // status and a range of its body). A tap that had the request go to the
  // upstream without its preconditions and Range (a cache filling its
  // entry wants the whole response) evaluates them on the response's head
  // here, as the upstream would have, and as nginx does for a response it
  // caches: 304, 412 or 416, the head alone, the call reading on for the
  // tap as when the client goes away (see above); 206, one range of the
  // body, the call reading on for the tap once the range has gone out.
  // Asked after answer_instead() with the same status and fields, and the
  // body's length when the upstream gave one; not when the client has gone.
  struct ClientAnswer {
    int status = 0;       // 0: the response as it comes
    uint64_t offset = 0;  // 206: the range of the body
    uint64_t length = 0;
  };
  virtual ClientAnswer client_answer(int /*status*/, std::span<const http::Header> /*fields*/,
                                     std::optional<uint64_t> /*length*/) {
    return {};
  }
  // Whether the tap still wants the rest of the response: asked when the
  // client goes away (true: the call reads on for the tap, see above), and
  // after each step while it does.
  virtual bool wants_rest() const { return false; }
  // The client went away and the call reads on: `request`, valid during
  // this call only, is copied as far as the tap still needs it.
  virtual void on_client_gone(const http::Request& /*request*/) {}
};

// Whether a field of an upstream's response head stays between the
// upstream and the server (see above).
bool is_unrelayed_field(std::string_view name);

// Whether an unrelayed field still says how fresh the response is (Date,
// X-Accel-Expires): the tap sees it (ResponseTap::on_head).
bool is_freshness_field(std::string_view name);

class Call final : public http::ExchangeJob, private net::ConnectionPool::User {
 public:
  // `group` outlives the call (it is its loop's).
  // The call's codec is a C made of `codec_args`, in one allocation with
  // the call.
  template <typename C, typename... Args>
  static void start(http::Exchange& exchange, Group& group, const CallOptions& options,
                    std::unique_ptr<ResponseTap> tap, Args&&... codec_args);

 private:
  Call(http::Exchange& exchange, Group& group, const CallOptions& options, Codec& codec,
       std::unique_ptr<ResponseTap> tap);

 public:
  // Lets go of the pool and timers if the call never ended (its exchange
  // went with its loop).
  ~Call() override;  // done(), if nothing ended the call before

 private:
  // Queued bytes at which a side stops feeding the other: the client's
  // body into the upstream, the upstream's response into the client.
  static constexpr size_t kHighWater = 256 * 1024;
  // Read from a spool at a time.
  static constexpr size_t kSpoolPiece = 64 * 1024;

  void begin();
  // Client side.
  void on_body(std::string_view piece, bool last);
  void on_client_drained();
  void on_client_gone();
  // The client went: whether the call reads on for its tap (see above),
  // taking what it needs of `exchange`, which is ending.
  bool read_on_for_tap(const http::Exchange& exchange);
  // Upstream side (ConnectionPool::User).
  void on_lease(net::TcpConnection& conn) override;
  void on_lease_failed(net::ConnectionPool::Failure failure, std::string_view why) override;
  void on_upstream_message(net::TcpConnection& conn, net::Buffer& input) override;
  void on_upstream_drained(net::TcpConnection& conn) override;
  void on_upstream_closed(net::TcpConnection& conn) override;

  // Takes a connection to the chosen server, or to the next one.
  void acquire();
  bool try_next_server(std::string_view why);
  // A head of one of next_on_status, when another server may be asked: it
  // is, and the head goes unrelayed. Whether it was.
  bool next_server_for(int status);
  // Whether the request may go to its server again, or to another: its
  // body can be sent again, and it is idempotent (or the options allow).
  bool may_send_again() const;
  // Whether the request is still there to send: its client's, or the one
  // kept when the client went.
  bool can_send_again() const;
  // Whether the options and the bounds leave another server to try.
  bool next_server_allowed();
  void write_request();
  void send_request();
  void pump_body();
  bool on_body_data(std::string_view data);
  void start_tunnel(net::Buffer& input);
  void tunnel_from_client(std::string_view piece);
  void tunnel_from_upstream(net::Buffer& input);
  void end_tunnel(std::string_view why);
  bool write_response_head();
  // The client's answer is a head alone (ResponseTap::client_answer: 304,
  // 412, 416): written, then the client is handed off. False if the call
  // ended.
  bool answer_head_alone(const ResponseHead& head, const ResponseTap::ClientAnswer& answer);
  // A piece of the body at `at`, of which the client takes what lies in
  // its range (window_); once that is whole, the client is handed off.
  bool relay_window(std::string_view data, uint64_t at);
  // The client's response is whole before the upstream's (a head alone, a
  // range): it is finished, and the call reads on for the tap while the
  // tap wants the rest. False if the call ended.
  bool hand_off_client();
  // The response head, for the tap alone (the client went). False if the
  // call ended.
  bool tap_response_head();
  // The upstream's fields the tap is shown before the head is relayed (see
  // ResponseTap::answer_instead), into relayed_.
  void fields_for_tap(const ResponseHead& head);
  // The head to the tap: relayed_ (the fields as relayed), then the
  // upstream's Date and X-Accel-Expires.
  void show_tap_head(const ResponseHead& head);
  // The same, relayed_ made first from the head: a response the client
  // does not get as it is.
  void show_tap_relayed_head(const ResponseHead& head);
  // A Location or Refresh value as relayed (see CallOptions::rewrite_from).
  std::string_view relayed_value(const http::Header& field);
  bool relay(std::string_view data);
  bool pump_response();
  void pause_upstream();
  void resume_upstream();
  void on_response_end(const net::Buffer& input);
  void end_response();
  // The timer of the current step: sending the request (send_timeout) or
  // waiting for the response (read_timeout).
  void arm_read_timer();
  bool sending() const;
  void on_read_timeout();
  // The server's outcome, once per attempt.
  void settle(bool failed);
  // Answers `status` if nothing was sent yet, else cuts the client off.
  void fail(int status, std::string_view why);
  void done();

  // " (request ID)", for the log lines about this call: kept here, since
  // the exchange may be gone when the line is written.
  std::string_view request_note() const { return {request_note_.data(), request_note_size_}; }

  http::Exchange* exchange_;  // null once the client has gone
  std::array<char, 80> request_note_{};
  uint8_t request_note_size_ = 0;
  Group& group_;
  const CallOptions options_;
  Codec* const codec_;  // beside the call (start())
  // With a tap: the configuration the exchange kept (options_ views it),
  // for a call that reads on for its tap (see owner_); it goes after the
  // tap. And the places the request holds under limits of requests in
  // flight, which it holds on while it reads on, as nginx's limit_conn.
  std::shared_ptr<const void> kept_;
  std::shared_ptr<const void> held_;
  std::unique_ptr<ResponseTap> tap_;
  net::EventLoop* const loop_;
  net::TcpConnection* upstream_ = nullptr;  // while leased
  net::Buffer pending_{0};  // the request waiting for a connection
  Spool body_;              // a buffered request body
  std::string replay_;      // a request without a body as sent, once the client went
  uint64_t body_sent_ = 0;  // of body_
  Spool response_;          // response bytes the client has not taken yet
  uint64_t response_sent_ = 0;
  std::string scratch_;     // for reading the spools
  // Rewritten Location and Refresh fields: a list, whose strings stay where
  // they are (relayed_ views them) and which allocates nothing until used.
  std::list<std::string> rewritten_;
  uint64_t tapped_ = 0;     // body bytes the tap has seen
  // A 206 in place of the whole response (ResponseTap::client_answer): the
  // range of the body relayed, as [begin, end) (end 0: the whole body).
  uint64_t window_begin_ = 0;
  uint64_t window_end_ = 0;
  bool window_full_ = false;  // the range went out; the client waits to be handed off
  std::vector<http::Header> relayed_;  // the head's relayed fields, for the tap
  net::TimerId read_timer_;
  std::chrono::steady_clock::time_point first_try_;
  uint64_t tried_ = 0;      // servers tried, a bit each
  size_t server_ = 0;       // of the group, for this attempt
  unsigned tries_ = 0;
  bool attempt_open_ = false;     // server_ has an outcome to report
  uint64_t attempt_began_ms_ = 0;  // when it took server_ (the loop's clock)
  bool buffer_body_ = false;      // the body is gathered before a connection is taken
  bool buffer_response_ = false;  // this response is read ahead of the client
  bool replayable_ = false;       // no body, or a buffered one: can be sent again
  bool idempotent_ = false;
  bool stale_possible_ = false;   // the connection had served other requests
  bool head_written_ = false;     // the request head is in pending_ or sent
  bool body_done_ = false;        // the end of the body is written
  bool response_started_ = false;
  bool upstream_done_ = false;    // the response is in; the connection went back
  bool answered_ = false;         // upstream bytes arrived
  bool retried_stale_ = false;
  bool tunnel_ = false;           // after a 101: raw bytes both ways
  bool done_ = false;
  // The call itself (with its codec), as its exchange holds it: taken when
  // the client goes and the call reads on for the tap, and let go after
  // the round in which the call ends, with kept_.
  std::weak_ptr<void> self_;
  std::shared_ptr<void> owner_;
};

template <typename C, typename... Args>
void Call::start(http::Exchange& exchange, Group& group, const CallOptions& options,
                 std::unique_ptr<ResponseTap> tap, Args&&... codec_args) {
  // The codec first: it goes after the call, which may still use it as it
  // ends.
  struct WithCodec {
    C codec;
    Call call;
    WithCodec(http::Exchange& e, Group& g, const CallOptions& o, std::unique_ptr<ResponseTap> t, Args&&... a)
        : codec(std::forward<Args>(a)...), call(e, g, o, codec, std::move(t)) {}
  };
  auto both = std::make_shared<WithCodec>(exchange, group, options, std::move(tap),
                                          std::forward<Args>(codec_args)...);
  Call& call = both->call;
  if (call.tap_) {
    call.self_ = both;
    call.kept_ = exchange.kept();
    call.held_ = exchange.held();
  }
  exchange.adopt(std::shared_ptr<http::ExchangeJob>(std::move(both), &call));
  call.begin();
}

}  // namespace tern::upstream
