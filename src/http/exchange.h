// Exchange: a request whose handler answers after returning.
//
// A Router handler answers at once: it gets the complete request, body
// included, and finishes its response before it returns. A handler that has
// to wait (for an upstream server, for a task thread) claims the request as
// an Exchange instead (handler.h), as soon as the head is complete, before
// any of the body has been read:
//
//   class Slow final : public RequestHandler {        // handler.h
//     Claim claim(Route& r) override { return mine(r) ? Claim::kExchange : Claim::kPass; }
//     void start(const Route&, Exchange& ex) override {
//       ex.set_body_handler([](std::string_view piece, bool last) { ... });
//       ex.set_abort_handler([job] { job->client_gone(); });
//       start_job(ex.id());                           // finds it again by id
//     }
//   };
//   server.add_handler(std::make_unique<Slow>());
//   // Later, on the same loop:
//   ex.writer().start(200).header("Content-Type", "text/plain").begin_stream();
//   ex.writer().write(data);
//   ex.flush();
//   ex.writer().end_stream();
//   ex.finish();
//
// Asynchronous work for an exchange follows one lifetime rule. Work that
// lives as long as the exchange (an upstream call) derives from
// ExchangeJob and is handed to adopt(): the exchange owns it and destroys
// it at the end of the round in which the exchange ended, so the job may
// finish() or abort() from inside its own methods. Work that comes back
// later from elsewhere (a task thread) keeps the exchange's id() and asks
// Exchange::find() on the loop: an exchange that ended, or a connection
// that went on to another request, finds nothing, and the answer is
// dropped. Neither needs a shared liveness flag.
//
// The head (every view in request()) stays valid until finish(). The body
// arrives in pieces through the body handler as the client sends it, so an
// upload of any size takes bounded memory; pause_body() stops reading from
// the client and resume_body() goes on. A producer that outruns the client
// checks pending_output_bytes() and calls wait_for_drain(); the drain handler
// runs once the client has taken everything queued. If the client goes away
// first, the abort handler runs, and the Exchange must not be used after it.
//
// Requests pipelined behind this one wait until finish(). If finish() comes
// before the whole body has arrived (a 405 or a 413 answered from the
// head), the rest of the body is read and dropped, never parsed as a
// request, and the connection goes on after it; when the client waits for
// a 100 (Continue) that was not sent, or the server is draining, when its
// head is written, the response says Connection: close instead. (A 100 is
// sent once the exchange has begun and is not holding its body: a guard
// that decides first, a limit's turn, asks for the body when it is done.)
//
// Owned by its transport (for HTTP/1, the connection's per-request state,
// pooled per loop) while the request is in progress. Loop thread only.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include "http/request.h"
#include "http/response_writer.h"
#include "net/secure_layer.h"
#include "net/callbacks.h"

namespace tern::net {
class EventLoop;
class InetAddress;
class TcpConnection;
}  // namespace tern::net

namespace tern::http {

class Exchange;

// Starts the work for a request taken as an Exchange.
using ExchangeHandler = std::function<void(Exchange&)>;

// Work owned by an exchange (see above).
class ExchangeJob {
 public:
  virtual ~ExchangeJob() = default;
};

// Names one exchange, across threads and across time: a slot of its
// loop's table of exchanges in progress and that slot's generation, so an
// exchange that ended is never mistaken for a later one.
struct ExchangeId {
  net::EventLoop* loop = nullptr;  // the loop the exchange lives on
  uint32_t slot = 0;               // its slot in that loop's table
  uint32_t generation = 0;         // the slot's generation when it began
  bool valid() const { return loop != nullptr; }  // names an exchange (one that may have ended)
};

// What carries an exchange: Http1Connection for HTTP/1.x, an HTTP/2 stream
// next, memory in tests (tests/support/exchange_harness.h). The Exchange
// turns a handler's calls into these.
class ExchangeTransport {
 public:
  // The loop the carrier lives on, and the address of its peer.
  virtual net::EventLoop* loop() const = 0;
  virtual const net::InetAddress& peer_address() const = 0;
  // The connection's client: the one its PROXY protocol header named, else
  // the peer.
  virtual const net::InetAddress& connection_client() const { return peer_address(); }
  // The address the client connected to.
  virtual const net::InetAddress& local_address() const = 0;
  // The carrier's TLS; null for plain HTTP.
  virtual const net::SecureLayer* secure() const { return nullptr; }
  // Whether a response whose head is written now must say it closes the
  // connection (the server is draining, or the rest of the body could not
  // be read and dropped after the response). The exchange's writer asks as
  // it writes the head.
  virtual bool must_close() const = 0;
  // The carrier's side of the Exchange's calls of the same names: sends
  // what the writer queued, counts the output queued, stops and resumes
  // reading the body, calls Exchange::drained() once the client has taken
  // the output.
  virtual void flush() = 0;
  virtual size_t pending_output_bytes() const = 0;
  virtual void pause_body() = 0;
  virtual void resume_body() = 0;
  virtual void wait_for_drain() = 0;
  // Exchange::finish() and Exchange::abort(): the response is complete, or
  // cannot be completed.
  virtual void finish_exchange() = 0;
  virtual void abort_exchange() = 0;
  // The 101 head is written: from now on raw bytes both ways (see
  // Exchange::switch_protocols). False where the carrier cannot (HTTP/2).
  virtual bool switch_protocols() { return false; }
  virtual void write_raw(std::string_view /*bytes*/) {}

 protected:
  ~ExchangeTransport() = default;
};

// One request a handler answers when it can (see the top of this file).
class Exchange {
 public:
  // Takes the request body piece by piece; `last` with the final piece.
  using BodyHandler = std::function<void(std::string_view piece, bool last)>;

  Exchange() = default;
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // The exchange with this id, if it is still in progress; loop thread of
  // id.loop only.
  static Exchange* find(const ExchangeId& id);
  // What find() takes, to reach the exchange again later.
  ExchangeId id() const;

  // Owns `job` until the end of the round in which the exchange ends. (A
  // job made by std::make_shared comes with its owner count: one
  // allocation, where a unique_ptr's job gets its count here.)
  void adopt(std::shared_ptr<ExchangeJob> job) { job_ = std::move(job); }
  // Keeps `value` (the configuration the request began under) alive as
  // long as the exchange.
  void keep(std::shared_ptr<const void> value) { kept_ = std::move(value); }
  // What keep() was given (null: nothing): a request of the server's own
  // made from this one keeps the same configuration alive.
  const std::shared_ptr<const void>& kept() const { return kept_; }
  // Holds `value` until the exchange ends (answered, or the client gone),
  // whatever job its handlers adopt meanwhile: places a request takes under
  // a limit of requests in flight.
  void hold_until_end(std::shared_ptr<const void> value) { held_ = std::move(value); }
  // What hold_until_end() was given: work that goes on for the request
  // after its exchange ends (a cache fill whose client left) holds it on.
  const std::shared_ptr<const void>& held() const { return held_; }

  const Request& request() const { return *request_; }  // the request's head
  // The response (see above for when it closes the connection).
  ResponseWriter& writer();
  // Sends what the writer has queued. It may end the exchange before it
  // returns, running the abort handler: an HTTP/2 stream whose response
  // went out whole with what was sent (a HEAD's head) closes then. A job
  // that goes on after a flush checks that it still has its exchange.
  void flush();
  // The output queued for the client and not yet sent.
  size_t pending_output_bytes() const;
  // The TCP peer (a load balancer, where one is in front).
  const net::InetAddress& peer_address() const { return transport_->peer_address(); }
  // The connection's client (the PROXY protocol's, else the peer).
  const net::InetAddress& connection_client() const { return transport_->connection_client(); }
  // The client (Request::client_address()).
  const net::InetAddress& client_address() const {
    return request_->has_client_address() ? request_->client_address() : transport_->peer_address();
  }
  // The address the client connected to.
  const net::InetAddress& local_address() const { return transport_->local_address(); }
  // The connection's TLS; null for plain HTTP.
  const net::SecureLayer* secure() const { return transport_->secure(); }
  // The loop the exchange lives on.
  net::EventLoop* loop() const { return transport_->loop(); }

  // Pieces of the body (decoded if chunked), each valid during the call
  // only; `last` on the final call, which may have an empty piece. A request
  // without a body gets no call.
  void set_body_handler(BodyHandler handler) { body_handler_ = std::move(handler); }
  // Stop and resume reading the body from the client; pausing does nothing
  // once the body is complete.
  void pause_body();
  void resume_body();
  // Holds the body back for a handler that has yet to take the request (a
  // request waiting for its turn under a rate limit, or for its password
  // check), whatever the handler then pauses and resumes: the body flows
  // once every hold is released and it is not paused. Holds count: a
  // request that waited for its turn and then for its check is held until
  // both let go.
  void hold_body();
  void release_body();
  // Whether the whole body has arrived (true for a request without one).
  bool body_complete() const { return body_complete_; }

  // What wait_for_drain() runs; set before calling it.
  void set_drain_handler(std::function<void()> handler) { drain_handler_ = std::move(handler); }
  // Runs the drain handler once, when the client has taken all queued output.
  void wait_for_drain();
  // What runs when the exchange is cut off before finish() or abort(): the
  // client went away, or the request failed. The Exchange must not be used
  // after it.
  void set_abort_handler(std::function<void()> handler) { abort_handler_ = std::move(handler); }

  // The response is complete: the connection goes on to the next request.
  void finish();
  // The response cannot be completed (an upstream failed after its head was
  // sent): what was written goes out, then the connection closes, so the
  // client sees a truncated body. The abort handler does not run.
  void abort();

  // A protocol switch (a WebSocket behind the proxy): once a 101 head is
  // written (writer().start(101)...end(), on a connection that stays open),
  // the connection carries raw bytes both ways until finish() or abort(),
  // which close it. What the client sends comes through the body handler
  // (never with `last`), paced by pause_body() and resume_body();
  // write_raw() queues bytes as they are; the drain and abort handlers work
  // as before. False (nothing changes) where the carrier cannot switch.
  bool switch_protocols();
  void write_raw(std::string_view bytes);

  // The transport's side.
  // A new exchange for `request`, carried by `transport`.
  void begin(ExchangeTransport* transport, const Request* request,
             const ResponseWriter::Context& context, bool has_body);
  // Whether an exchange is in progress: begun and not ended.
  bool active() const { return id_.valid(); }
  // A piece of the body arrived (see set_body_handler).
  void deliver(std::string_view piece, bool last);
  // Whether the transport should not read the body now.
  bool body_paused() const { return body_paused_ || body_holds_ > 0; }
  // The output drained after wait_for_drain().
  void drained();
  // The response as it stands (without the close that writer() may add).
  ResponseWriter& response() { return *writer_; }
  // Ends the exchange: drops its handlers (and, after the round, its job).
  void end();
  // The client went away, or the request failed: ends the exchange, then
  // runs the abort handler.
  void cancel();

 private:
  ExchangeTransport* transport_ = nullptr;
  const Request* request_ = nullptr;
  std::optional<ResponseWriter> writer_;
  BodyHandler body_handler_;
  std::function<void()> drain_handler_;
  std::function<void()> abort_handler_;
  std::shared_ptr<ExchangeJob> job_;
  std::shared_ptr<const void> kept_;
  std::shared_ptr<const void> held_;
  ExchangeId id_;  // valid while active
  bool body_complete_ = true;
  bool body_paused_ = false;
  uint32_t body_holds_ = 0;  // hold_body() not yet released
};

}  // namespace tern::http
