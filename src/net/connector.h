// Connector: opens one outgoing stream connection (TCP, or a Unix-domain
// socket), retrying with back-off.
//
// Each attempt is a non-blocking connect() watched for writability, bounded by
// a connect timeout. A failed attempt is retried after a delay that doubles
// from initial_backoff up to max_backoff, with "equal jitter" (half the delay
// fixed, half random) so that many clients cut off together do not return in
// lock-step. The back-off resets when a connection succeeds, and comes
// back when its owner reports that connection failed before it could be
// used (connection_failed: a TLS handshake). A connect to a local port can
// connect a socket to itself; that counts as a failure.
//
// Owned by TcpClient. Loop thread only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <random>

#include "base/result.h"
#include "net/channel.h"
#include "net/socket_address.h"
#include "net/socket.h"
#include "net/timer_wheel.h"

namespace tern::net {

class EventLoop;

// How a Connector tries.
struct ConnectorOptions {
  std::chrono::milliseconds connect_timeout{5000};  // an attempt not done by then fails
  std::chrono::milliseconds initial_backoff{100};   // the first wait before a retry (doubling, jittered)
  std::chrono::milliseconds max_backoff{30000};     // the longest wait
  bool retry = true;     // retry failed attempts
  int max_attempts = 0;  // give up after this many failed attempts; 0: never
};

class Connector {
 public:
  using ConnectedCallback = std::function<void(Socket socket)>;  // takes the connected socket
  // Every failed attempt; will_retry says whether another is scheduled.
  using FailedCallback = std::function<void(const Error& error, bool will_retry)>;

  // Connects to `server` from `loop` when start() is called.
  Connector(EventLoop* loop, const SocketAddress& server, ConnectorOptions options);

  ~Connector();
  Connector(const Connector&) = delete;
  Connector& operator=(const Connector&) = delete;

  void set_connected_callback(ConnectedCallback cb) { connected_cb_ = std::move(cb); }  // before start()
  void set_failed_callback(FailedCallback cb) { failed_cb_ = std::move(cb); }           // before start()

  // Starts connecting after `delay` (0: now). Cancels any attempt in progress.
  void start(std::chrono::milliseconds delay = std::chrono::milliseconds(0));
  // Stops the attempt in progress and any scheduled retry.
  void stop();
  // The connection it handed over last failed before its owner could use
  // it (a TLS handshake that did not end): counted as the failed attempt it
  // was, after those that came before the connect, and retried as one
  // (their back-off, max_attempts); the failed callback hears of it.
  void connection_failed(Error error);
  bool active() const { return active_; }  // connecting, or waiting to retry
  int failed_attempts() const { return failed_attempts_; }  // since the last connect that succeeded
  const SocketAddress& server() const { return server_; }   // what it connects to

 private:
  void attempt();
  void handle_writable();
  void handle_timeout();
  void attempt_failed(Error error);
  void abandon_socket();
  std::chrono::milliseconds next_delay();

  EventLoop* const loop_;
  const SocketAddress server_;
  const ConnectorOptions options_;
  bool active_ = false;
  Socket socket_;
  Channel channel_;
  TimerId retry_timer_;
  TimerId timeout_timer_;
  std::chrono::milliseconds backoff_;
  int failed_attempts_ = 0;
  // As they were when the last connect succeeded (connection_failed()).
  std::chrono::milliseconds backoff_before_connect_;
  int failed_before_connect_ = 0;

  std::minstd_rand rng_;
  ConnectedCallback connected_cb_;
  FailedCallback failed_cb_;
  // False once destroyed: the failed callback may destroy its owner.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace tern::net
