#include "net/connector.h"

#include <cerrno>
#include <utility>

#include "base/log.h"
#include "net/event_loop.h"
#include "net/sockets.h"

namespace tern::net {

Connector::Connector(EventLoop* loop, const SocketAddress& server, ConnectorOptions options)
    : loop_(loop),
      server_(server),
      options_(options),
      channel_(loop, -1),
      backoff_(options.initial_backoff),
      backoff_before_connect_(options.initial_backoff),
      rng_(std::random_device{}()) {
  channel_.set_write_callback([this] { handle_writable(); });
  channel_.set_error_callback([this] { handle_writable(); });
  channel_.set_close_callback([this] { handle_writable(); });
}

Connector::~Connector() {
  *alive_ = false;
  stop();
}

void Connector::start(std::chrono::milliseconds delay) {
  loop_->assert_in_loop_thread();
  stop();
  active_ = true;
  if (delay.count() <= 0) return attempt();
  retry_timer_ = loop_->run_after(delay, [this] {
    retry_timer_ = TimerId{};
    attempt();
  });
}

void Connector::stop() {
  loop_->assert_in_loop_thread();
  active_ = false;
  if (retry_timer_.valid()) loop_->cancel(retry_timer_);
  retry_timer_ = TimerId{};
  abandon_socket();
}

void Connector::abandon_socket() {
  if (timeout_timer_.valid()) loop_->cancel(timeout_timer_);
  timeout_timer_ = TimerId{};
  if (socket_.valid()) {
    channel_.remove();
    channel_.reset(-1);
    socket_.reset();
  }
}

void Connector::attempt() {
  if (!active_) return;
  auto fd = sockets::create_tcp(server_.family());
  if (!fd) return attempt_failed(fd.error());
  socket_.reset(*fd);
  int err = sockets::connect(socket_.fd(), server_);
  if (err != 0 && err != EINPROGRESS && err != EISCONN) {
    return attempt_failed(Error{err, "connect"});
  }
  // Even an immediate success is reported through writability, so the
  // callback never runs inside start().
  channel_.reset(socket_.fd());
  channel_.enable_writing();
  timeout_timer_ = loop_->run_after(options_.connect_timeout, [this] {
    timeout_timer_ = TimerId{};
    handle_timeout();
  });
}

void Connector::handle_writable() {
  if (!socket_.valid()) return;
  int err = sockets::socket_error(socket_.fd());
  if (err != 0) return attempt_failed(Error{err, "connect"});
  if (!server_.is_unix() && sockets::is_self_connect(socket_.fd())) {
    return attempt_failed(Error{ECONNREFUSED, "connect (self-connect)"});
  }
  if (timeout_timer_.valid()) loop_->cancel(timeout_timer_);
  timeout_timer_ = TimerId{};
  channel_.remove();
  channel_.reset(-1);
  active_ = false;
  failed_before_connect_ = std::exchange(failed_attempts_, 0);
  backoff_before_connect_ = std::exchange(backoff_, options_.initial_backoff);
  Socket connected = std::move(socket_);
  if (connected_cb_) connected_cb_(std::move(connected));
}

void Connector::connection_failed(Error error) {
  loop_->assert_in_loop_thread();
  stop();
  failed_attempts_ = failed_before_connect_;
  backoff_ = backoff_before_connect_;
  active_ = true;
  attempt_failed(error);
}

void Connector::handle_timeout() { attempt_failed(Error{ETIMEDOUT, "connect"}); }

void Connector::attempt_failed(Error error) {
  abandon_socket();
  ++failed_attempts_;
  const bool will_retry = active_ && options_.retry &&
                          (options_.max_attempts == 0 || failed_attempts_ < options_.max_attempts);
  TERN_LOG_DEBUG("connect to {}: {} (attempt {}{})", server_.to_string(), error.message(),
                 failed_attempts_, will_retry ? ", will retry" : "");
  if (!will_retry) active_ = false;
  const std::shared_ptr<bool> alive = alive_;
  if (failed_cb_) failed_cb_(error, will_retry);
  if (!*alive || !will_retry || !active_) return;  // the callback may have stopped or destroyed us
  retry_timer_ = loop_->run_after(next_delay(), [this] {
    retry_timer_ = TimerId{};
    attempt();
  });
}

std::chrono::milliseconds Connector::next_delay() {
  auto base = backoff_.count();
  backoff_ = std::min(backoff_ * 2, options_.max_backoff);
  if (base < 2) return std::chrono::milliseconds(base);
  std::uniform_int_distribution<long> jitter(0, base / 2);
  return std::chrono::milliseconds(base - base / 2 + jitter(rng_));
}

}  // namespace tern::net
