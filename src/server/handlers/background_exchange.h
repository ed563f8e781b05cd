// BackgroundExchange: a request of the server's own, made from a client's
// GET (a copy of its head), that no connection carries: its response is
// read to the end and dropped. What a cache refreshes a stale entry on while
// the client that found it is answered from the entry (upstream_cache.h),
// as nginx's proxy_cache_background_update runs a subrequest.
//
//   BackgroundExchange::start(client, [fetch](http::Exchange& ex) {
//     upstream::Call::start<...>(ex, ...);  // a call as for any exchange
//   });
//   client.writer().start(200)...;          // the client goes on at once
//
// It keeps what the client's exchange keeps (the configuration the request
// began under) and owns itself: it goes after the round in which its
// exchange ends. The server's shutdown closes the upstream pools, which
// ends every call still running, and with it the exchange. The client's
// addresses are copied; it has no TLS layer of its own (a handler that
// forwards the client's certificate sends none), and its request has no
// body. Loop thread only.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "http/exchange.h"
#include "http/response_stream.h"
#include "net/inet_address.h"

namespace tern::server {

class BackgroundExchange final : public http::ExchangeTransport,
                                 private http::ResponseStream,
                                 public std::enable_shared_from_this<BackgroundExchange> {
 public:
  // Runs `handler` on a GET of `from`'s target with `from`'s fields, on
  // from's loop. False (nothing started) when the copy is refused as a
  // request, which a head that was one never is.
  static bool start(const http::Exchange& from, const std::function<void(http::Exchange&)>& handler);

  // Use start(): public for make_shared.
  explicit BackgroundExchange(const http::Exchange& from);
  BackgroundExchange(const BackgroundExchange&) = delete;
  BackgroundExchange& operator=(const BackgroundExchange&) = delete;

  // ExchangeTransport
  net::EventLoop* loop() const override { return loop_; }
  const net::InetAddress& peer_address() const override { return peer_; }
  const net::InetAddress& connection_client() const override { return connection_client_; }
  const net::InetAddress& local_address() const override { return local_; }
  bool must_close() const override { return false; }
  void flush() override {}
  size_t pending_output_bytes() const override { return 0; }
  void pause_body() override {}
  void resume_body() override {}
  void wait_for_drain() override;
  void finish_exchange() override { done(); }
  void abort_exchange() override { done(); }

 private:
  // Fills request_ with a copy of `from`'s head, from `client`; false when
  // it is refused.
  bool make_request(const http::Request& from, const net::InetAddress& client);
  // The exchange is over: it and this go after the round.
  void done();

  // ResponseStream: everything dropped.
  void start_head(int, std::string_view, const http::HeadStart&) override {}
  void field(std::string_view, std::string_view) override {}
  void fields(const http::FieldBlock&) override {}
  bool end_head(const http::ResponseFraming&) override { return true; }
  void data(std::string_view) override {}
  void kept_data(std::string_view, const http::BodyOwner&) override {}
  void file(net::FileRegion) override {}
  void end() override {}

  net::EventLoop* const loop_;
  const net::InetAddress peer_;
  const net::InetAddress connection_client_;
  const net::InetAddress local_;
  std::string text_;                        // what request_'s views name
  http::Request request_;
  http::Exchange exchange_;
  std::shared_ptr<BackgroundExchange> self_;  // from start() until end()
};

}  // namespace tern::server
