// HttpConnection: one protocol on one TcpConnection, as HttpServer sees it.
// Its two kinds are siblings: Http1Connection (http1/) for HTTP/1.x, and
// Http2Connection (http2/) for HTTP/2. HttpServer chooses one for each
// connection, once, from the first bytes it receives: TLS that agreed on
// "h2" (ALPN), or on a plain address that takes h2c, HTTP/2's preface
// (prior knowledge); anything else is HTTP/1. It then gives the connection's
// events to the one it chose: the TcpConnection's context slot points to it.
//
// Both take each request through the same handler chain (http/dispatch.h),
// so that a handler, a filter, a log or an upstream codec never sees which
// protocol carried it. Loop thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "http/handler.h"
#include "http/http_limits.h"

namespace tern::net {
class Buffer;
class InetAddress;
class TcpConnection;
}  // namespace tern::net

namespace tern::http {

class RequestStatePool;

class HttpConnection {
 public:
  virtual ~HttpConnection() = default;

  // Bytes arrived (TcpConnection's message callback): consume what it can.
  virtual void on_message(net::Buffer& input) = 0;
  // The connection's output queue drained (when asked for).
  virtual void on_write_complete() = 0;
  // The connection closed, by either side: let go of it and of the
  // requests in progress (their handlers are told).
  virtual void on_close() = 0;
  // The server stops: end once what is in progress is done (an HTTP/1
  // connection between requests after a short grace, an HTTP/2 one with a
  // GOAWAY). Closes nothing at once.
  virtual void close_if_idle() = 0;
  // Where the connection stands, as nginx's status counts connections:
  // waiting for a request, reading one (head or body), or answering.
  enum class Phase : uint8_t { kIdle, kReading, kWriting };
  virtual Phase phase() const = 0;  // where it stands now

  // Position in the owner's table (HttpServer bookkeeping).
  size_t index() const { return index_; }
  void set_index(size_t index) { index_ = static_cast<uint32_t>(index); }
  // HTTP/1 so far, but the first bytes may still say HTTP/2 (HttpServer
  // looks at them before this connection does).
  bool may_switch() const { return may_switch_; }
  void set_may_switch(bool may) { may_switch_ = may; }
  // An Http1Connection (kept in the server's pool once closed).
  bool http1() const { return http1_; }

 protected:
  explicit HttpConnection(bool http1) : http1_(http1) {}  // http1: an Http1Connection
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

 private:
  uint32_t index_ = 0;
  bool may_switch_ = false;
  const bool http1_;
};

struct HttpShared;
// Makes the connection of another protocol than HTTP/1.
using ProtocolFactory =
    std::function<std::unique_ptr<HttpConnection>(const HttpShared* shared, net::TcpConnection* conn)>;
// Another protocol than HTTP/1 (HTTP/2: http2::http2_protocol()), so that
// http/ need not know it: how its connection is made, and the bytes a
// client opens with to ask for it by prior knowledge on a plain address
// (HTTP/2's preface).
struct Protocol {
  ProtocolFactory make;      // makes a connection of the protocol
  std::string_view preface;  // what a client opens with to ask for it
};
// Picks connections by the address they came in on (their local address).
using AddressFilter = std::function<bool(const net::InetAddress& local)>;
// The AddressFilter that picks every connection.
inline bool any_address(const net::InetAddress& /*local*/) { return true; }

// What every connection of a loop shares: set up by HttpServer.
struct HttpShared {
  const HttpLimits* limits = nullptr;  // the server's limits (HttpServer::set_limits)
  std::string_view server_name;        // the Server field's value; empty: none
  // The server's handler chain, asked in order for each complete head.
  const std::vector<RequestHandler*>* handlers = nullptr;
  // After each response (for the access log); may be empty.
  std::function<void(const Request&, const net::TcpConnection&, const ResponseWriter&)> on_response;
  // What every response of this second starts with, cached per loop.
  struct Clock {
    std::string_view date;     // the Date header value
    std::string_view ok_head;  // status line, Server and Date of a 200
  };
  std::function<Clock()> clock;  // the loop's Clock of this second
  // Server is shutting down: finish the current request, then close.
  bool draining = false;
  RequestStatePool* states = nullptr;  // HTTP/1's request states
};

}  // namespace tern::http
