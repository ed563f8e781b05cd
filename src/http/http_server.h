// HttpServer: an HTTP/1.1 server on a TcpServer, with a Router.
//
//   EventLoop loop;
//   HttpServer server(&loop, InetAddress(8080));
//   server.get("/hello", [](const Request&, ResponseWriter& w) {
//     w.start(200).header("Content-Type", "text/plain").body("hello\n");
//   });
//   if (!server.start()) return 1;
//   loop.loop();
//
// Handlers run on the I/O loop that owns the connection and must finish their
// response before returning. Beyond the Router, handlers of one's own (see
// handler.h) join the chain after it: one that takes requests as Exchanges
// answers when it can, from another thread's work or an upstream's. Everything the protocol needs per loop (a pool
// of Http1Connection objects, the cached Date header) lives in that loop.
//
// Owned by the user, on the base loop's thread, like TcpServer; routes and
// callbacks are set before start().
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/result.h"
#include "http/router.h"
#include "http/http_connection.h"
#include "net/inet_address.h"
#include "net/loop_local.h"
#include "net/tcp_server.h"

namespace tern::http {

// The TCP options an HTTP server starts from.
inline net::TcpServerOptions http_tcp_defaults() {
  net::TcpServerOptions tcp;
  tcp.defer_accept = std::chrono::seconds(1);  // HTTP clients speak first
  return tcp;
}

// What HttpServer is made with.
struct HttpServerOptions {
  net::TcpServerOptions tcp = http_tcp_defaults();  // loops, threads, accepting
  HttpLimits limits;                                // what a request may be
  std::string server_name = "tern";                 // the Server field; empty: none
  // HTTP/2 (http2::http2_protocol()): for connections whose TLS agreed on
  // "h2", and on the plain addresses http2_cleartext accepts for those that
  // begin with HTTP/2's preface (h2c by prior knowledge; any_address: all).
  // Empty: HTTP/1 only.
  Protocol http2{};
  AddressFilter http2_cleartext{};
};

class HttpServer {
 public:
  // Called after each response (see set_response_callback).
  using ResponseCallback =
      std::function<void(const Request&, const net::TcpConnection&, const ResponseWriter&)>;

  // A server on `address`, or on several (IPv4 and IPv6, several ports),
  // whose loops are `loop` and the options' I/O threads. Listens at start().
  HttpServer(net::EventLoop* loop, const net::InetAddress& address, HttpServerOptions options = {});
  HttpServer(net::EventLoop* loop, std::vector<net::InetAddress> addresses,
             HttpServerOptions options = {});

  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The first handler of the chain, and its get() and post() (router.h).
  Router& router() { return router_; }
  void get(std::string path, Handler handler) { router_.get(std::move(path), std::move(handler)); }
  void post(std::string path, Handler handler) { router_.post(std::move(path), std::move(handler)); }

  // Adds `handler` to the chain, after the Router and the handlers added
  // before it. Before start().
  void add_handler(std::unique_ptr<RequestHandler> handler) {
    handlers_.push_back(handler.get());
    owned_.push_back(std::move(handler));
  }

  // Called after every response, on the connection's loop (access logs).
  void set_response_callback(ResponseCallback cb) { on_response_ = std::move(cb); }
  // Runs on each I/O loop's thread before it serves.
  void set_thread_init_callback(std::function<void(net::EventLoop*)> cb) {
    thread_init_ = std::move(cb);
  }

  // Binds, listens and starts the I/O loops; fails when an address cannot be bound.
  Result<void> start();
  // The first address, with the port the kernel gave when it was 0.
  const net::InetAddress& listen_address() const { return tcp_.listen_address(); }
  // The TCP server underneath: TLS (set_secure_context), PROXY protocol, gates.
  net::TcpServer& tcp_server() { return tcp_; }

  // New timeouts and limits for requests that start from now on (SIGHUP).
  // Base loop thread.
  void set_limits(const HttpLimits& limits);

  // The connections of every loop by phase (HttpConnection::Phase), as
  // each loop counted them at its last sample: once a second while
  // count_connection_phases is on (a walk over the loop's connections; off
  // by default). Any thread.
  void count_connection_phases(bool on) { count_phases_.store(on, std::memory_order_relaxed); }
  // Connections by phase.
  struct ConnectionStates {
    uint64_t open = 0;     // connections in all
    uint64_t reading = 0;  // reading a request
    uint64_t writing = 0;  // answering one
    uint64_t idle = 0;     // waiting for the next
  };
  ConnectionStates connection_states() const;  // the counts of the last samples

  // Graceful stop: answer what is in progress with "Connection: close", close
  // idle keep-alive connections. Base loop thread.
  void drain();

 private:
  struct LoopContext;
  void on_connection(net::TcpConnection& conn);
  // The connection came in on a plain address that takes h2c.
  bool takes_h2c(const net::TcpConnection& conn) const;
  // HTTP/1 or HTTP/2, from a connection's first bytes (ALPN, or the h2c
  // preface): the one that gets them, or null while too few have come.
  HttpConnection* choose_protocol(net::TcpConnection& conn, net::Buffer& input);
  // Takes a closed connection out of the loop's table.
  static void release(LoopContext& context, size_t index);

  HttpServerOptions options_;
  Router router_;
  std::vector<std::unique_ptr<RequestHandler>> owned_;
  std::vector<RequestHandler*> handlers_{&router_};  // the chain, in order
  ResponseCallback on_response_;
  std::function<void(net::EventLoop*)> thread_init_;
  std::atomic<bool> count_phases_{false};
  net::LoopLocal<LoopContext> contexts_;  // one per I/O loop
  net::TcpServer tcp_;  // declared last: destroyed (and its loops joined) first
};

}  // namespace tern::http
