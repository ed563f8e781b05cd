#include "net/tcp_connection.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/assert.h"
#include "base/log.h"
#include "net/connection_table.h"
#include "net/event_loop.h"
#include "net/sockets.h"

namespace tern::net {
namespace {

// Where the poller receives for connections (io_uring), a plain
// connection whose bytes come in large pieces (Poller::large_receive: an
// upload, a relayed body, large messages) reads them itself from then on,
// straight into its input buffer: a receive copies them once more, out of
// the poller's ring of buffers, which is also colder in cache than the
// loop's buffer pool. A read of less than kSmallRead hands the connection
// back to the poller's receives, which cost small requests no system call.
constexpr size_t kSmallRead = 4 * 1024;

bool is_peer_error(int err) {
  return err == ECONNRESET || err == EPIPE || err == ETIMEDOUT || err == EHOSTUNREACH ||
         err == ENETUNREACH;
}

}  // namespace

const ChannelHandler TcpConnection::kChannelHandler = {
    [](void* c) { static_cast<TcpConnection*>(c)->handle_read(); },
    [](void* c) { static_cast<TcpConnection*>(c)->handle_write(); },
    [](void* c) { static_cast<TcpConnection*>(c)->handle_close(); },
    [](void* c) { static_cast<TcpConnection*>(c)->handle_error(); },
    [](void* c, const char* data, ssize_t n) {
      static_cast<TcpConnection*>(c)->handle_received(data, n);
    },
    [](void* c, ssize_t n) { static_cast<TcpConnection*>(c)->handle_sent(n); },
};

TcpConnection::TcpConnection(EventLoop* loop, uint32_t slot)
    : slot_(slot), channel_(loop, -1) {
  channel_.set_handler(&kChannelHandler, this);
}

TcpConnection::~TcpConnection() {
  // Only the loop's ConnectionTable destroys connections, on the loop thread,
  // either pooled ones or, at loop shutdown, live ones (without callbacks).
  if (secure_) secure_->timer.cancel();
  if (client_) client_->timer.cancel();
  if (state_ != State::kIdle && state_ != State::kDisconnected) {
    if (idle_timer_) idle_timer_->cancel();
    abandon_send();
    channel_.remove();
  }
}

void TcpConnection::open(Socket socket, const InetAddress& peer,
                         const ConnectionCallbacks* callbacks, TriggerMode trigger) {
  TERN_DCHECK(state_ == State::kIdle);
  socket_ = std::move(socket);
  channel_.reset(socket_.fd());
  local_known_ = false;
  peer_ = peer;
  callbacks_ = callbacks;
  trigger_ = trigger;
  high_water_mark_ = static_cast<uint32_t>(std::min<size_t>(callbacks->high_water_mark, UINT32_MAX));
  state_ = State::kConnected;
}

const InetAddress& TcpConnection::local_address() const {
  if (!local_known_ && socket_.valid()) {
    local_ = sockets::local_address(socket_.fd());
    local_known_ = true;
  }
  return local_;
}

bool TcpConnection::peer_is_local() const {
  return peer_.is_loopback() || (socket_.valid() && peer_.same_ip(local_address()));
}

void TcpConnection::establish(bool input_waiting) {
  loop()->assert_in_loop_thread();
  TERN_CHECK(state_ == State::kConnected);
  reading_ = true;
  if (awaiting_proxy_header_) {
    // Announced once the header is read (proxy_header_read), which may be
    // in this first read.
    if (input_waiting) handle_read();
    if (!disconnected() && !close_scheduled_) register_channel();
    return;
  }
  if (secure_ && secure_->client) {
    // A TLS client speaks first; on_connection waits for the handshake.
    register_channel();
    return secure_start();
  }
  if (!input_waiting) {
    register_channel();
    if (callbacks_->on_connection) callbacks_->on_connection(*this);
    return;
  }
  // As nginx does with a deferred accept: read first, register after, and
  // only if the connection outlives that read (an HTTP/1.0 request is read,
  // answered and closed here without an epoll_ctl).
  if (callbacks_->on_connection) callbacks_->on_connection(*this);
  if (state_ == State::kConnected && reading_ && !close_scheduled_) handle_read();
  if (disconnected() || close_scheduled_) return;
  register_channel();
}

void TcpConnection::register_channel() {
  if (trigger_ == TriggerMode::kEdge) {
    // Registered once for both directions; see TriggerMode. (EPOLL_CTL_ADD
    // reports readiness that is already there, edge-triggered or not.)
    channel_.set_edge_triggered(true);
    if (reading_) {
      channel_.enable_all();
    } else {
      channel_.enable_writing();
    }
  } else if (reading_) {
    channel_.enable_reading();
  }
}

void TcpConnection::recycle() {
  TERN_DCHECK(state_ == State::kDisconnected);
  ++generation_;
  state_ = State::kIdle;
  socket_.reset();
  channel_.reset(-1);
  input_.retrieve_all();
  output_.retrieve_all();
  sending_.retrieve_all();
  loop()->buffers().drain(input_);
  loop()->buffers().drain(output_);
  loop()->buffers().drain(sending_);
  files_.clear();
  if (secure_) {
    secure_->timer.cancel();
    secure_->in.retrieve_all();
    secure_->out.retrieve_all();
    loop()->buffers().drain(secure_->in);
    loop()->buffers().drain(secure_->out);
    secure_.reset();
  }
  if (client_) {
    // Kept for the next life, emptied.
    client_->timer.cancel();
    client_->relayed = false;
    client_->header = ProxyHeader{};
    client_->admit = nullptr;
    client_->gate.reset();
  }
  awaiting_proxy_header_ = false;
  context_.reset();
  callbacks_ = nullptr;
  reading_ = peer_closed_ = close_scheduled_ = close_after_write_ = write_complete_asked_ = false;
  received_while_paused_ = eof_waiting_ = send_in_flight_ = send_scheduled_ = false;
  write_yielded_ = false;  // its posted turn finds the old generation gone
  idle_timeout_ms_ = 0;
  idle_timer_on_ = false;
  if (idle_timer_) idle_timer_->cancel();
  bytes_received_ = bytes_sent_ = 0;
  close_error_ = 0;
}

void TcpConnection::shutdown() {
  loop()->assert_in_loop_thread();
  if (state_ != State::kConnected) return;
  state_ = State::kDisconnecting;
  if (!has_pending_output()) (void)sockets::shutdown_write(socket_.fd());
}

void TcpConnection::force_close() {
  loop()->assert_in_loop_thread();
  if (state_ == State::kConnected || state_ == State::kDisconnecting) close_at_round_end();
}

void TcpConnection::close_after_write() {
  loop()->assert_in_loop_thread();
  if (state_ != State::kConnected && state_ != State::kDisconnecting) return;
  if (!has_pending_output()) return close_at_round_end();
  close_after_write_ = true;
  state_ = State::kDisconnecting;  // accepts no more output
  // Written now, the last bytes go with MSG_MORE (see flush_output): the
  // close at the end of this round puts the FIN in their packet, as a
  // corked nginx does, which spares the peer a wake-up.
  if (!close_scheduled_) flush_output();
}

void TcpConnection::start_reading() {
  loop()->assert_in_loop_thread();
  if (reading_ || (state_ != State::kConnected && state_ != State::kDisconnecting)) return;
  if (peer_closed_) return;
  reading_ = true;
  // Bytes received for us while paused (io_uring, or decrypted) are handed
  // over after this round, not from inside the caller, and the peer's end,
  // if it came behind them, after them: nothing more is to be read then.
  if (received_while_paused_ || eof_waiting_) defer_callback(Deferred::kDeliverWaitingInput);
  if (eof_waiting_) return;
  // For edge-triggered channels EPOLL_CTL_MOD re-checks readiness, so input
  // that arrived while we were not reading is reported again.
  channel_.enable_reading();
}

void TcpConnection::stop_reading() {
  loop()->assert_in_loop_thread();
  if (!reading_) return;
  reading_ = false;
  channel_.disable_reading();
}

void TcpConnection::set_idle_timeout(std::chrono::milliseconds timeout) {
  loop()->assert_in_loop_thread();
  idle_timeout_ms_ = static_cast<uint32_t>(std::clamp<int64_t>(timeout.count(), 0, UINT32_MAX));
  if (idle_timer_) idle_timer_->cancel();
  idle_timer_on_ = false;
  if (timeout.count() <= 0 || state_ == State::kDisconnected || state_ == State::kIdle) return;
  if (!idle_timer_) idle_timer_ = std::make_unique<Timeout>(&TcpConnection::idle_timed_out, this);
  idle_timer_on_ = true;
  idle_timer_->arm(timeout);
}

void TcpConnection::idle_timed_out(void* self) {
  auto* conn = static_cast<TcpConnection*>(self);
  if (conn->disconnected()) return;
  TERN_LOG_DEBUG("conn {} {}: idle for {} ms, closing", conn->slot_, conn->peer_.to_ip_port(),
                 conn->idle_timeout_ms_);
  conn->handle_close();
}

void TcpConnection::set_high_water_mark(size_t bytes) {
  loop()->assert_in_loop_thread();
  high_water_mark_ = static_cast<uint32_t>(std::min<size_t>(bytes, UINT32_MAX));
}

Buffer& TcpConnection::input() {
  loop()->assert_in_loop_thread();
  return input_;
}

std::any& TcpConnection::context() {
  loop()->assert_in_loop_thread();
  return context_;
}

void TcpConnection::set_tcp_nodelay(bool on) {
  loop()->assert_in_loop_thread();
  (void)sockets::set_tcp_nodelay(socket_.fd(), on);
}

void TcpConnection::count_received(uint64_t bytes) {
  bytes_received_ += bytes;
  if (accepted_) loop()->load().bytes_received.add(bytes);
  note_activity(bytes);
}

void TcpConnection::count_sent(uint64_t bytes) {
  bytes_sent_ += bytes;
  if (accepted_) loop()->load().bytes_sent.add(bytes);
  note_activity(bytes);
}

void TcpConnection::note_activity(uint64_t bytes) {
  loop()->load().bytes_this_period += bytes;
  if (idle_timer_on_) idle_timer_->arm(std::chrono::milliseconds(idle_timeout_ms_));
}

void TcpConnection::handle_read() {
  // A PROXY protocol header comes before TLS: read as plain bytes.
  if (secure_ && !awaiting_proxy_header_) return secure_read();
  // Level-triggered: one read per event, the loop comes back if more is
  // waiting. Edge-triggered: read until the socket is drained or the
  // application stops reading.
  for (;;) {
    int err = 0;
    size_t offered = 0;
    loop()->buffers().fill(input_);
    ssize_t n = input_.read_fd(socket_.fd(), &err, &offered);
    if (n > 0) {
      count_received(static_cast<uint64_t>(n));
      const bool back_to_receives = channel_.reads_itself() && static_cast<size_t>(n) < kSmallRead;
      if (awaiting_proxy_header_) [[unlikely]] {
        proxy_input();  // and what came after the header, once it is read
      } else {
        deliver_input();
      }
      if (back_to_receives) return channel_.set_reads_itself(false);
      if (trigger_ == TriggerMode::kLevel || !reading_ || disconnected() || close_scheduled_ ||
          drained(static_cast<size_t>(n), offered)) {
        return;
      }
      if (secure_ && !awaiting_proxy_header_) return secure_read();
      continue;
    }
    loop()->buffers().drain(input_);
    if (n == 0) return handle_peer_eof();
    if (err == EAGAIN || err == EWOULDBLOCK) return;
    return fail(err, "read");
  }
}

bool TcpConnection::drained(size_t n, size_t offered) const {
  // Edge-triggered, a read that came short drained the socket, unless the
  // peer's end came with the bytes: it is read next (nginx's pending_eof),
  // as no later edge would report it.
  return n < offered && !channel_.peer_end_reported();
}

void TcpConnection::handle_received(const char* data, ssize_t n) {
  // Bytes the poller received for us (io_uring). A closing connection drops
  // them, as a read would not have happened.
  if (close_scheduled_ || (state_ != State::kConnected && state_ != State::kDisconnecting)) return;
  if (n < 0) return fail(static_cast<int>(-n), "recv");
  if (n == 0) return handle_peer_eof();
  count_received(static_cast<uint64_t>(n));
  if (awaiting_proxy_header_) [[unlikely]] {
    loop()->buffers().fill(input_);
    input_.append(data, static_cast<size_t>(n));
    return proxy_input();
  }
  if (secure_) return secure_received(data, static_cast<size_t>(n));
  loop()->buffers().fill(input_);
  input_.append(data, static_cast<size_t>(n));
  if (static_cast<size_t>(n) >= loop()->poller().large_receive()) channel_.set_reads_itself(true);
  // Paused, the bytes wait in input_ (as they would in the socket) until
  // start_reading().
  if (reading_) return deliver_input();
  received_while_paused_ = true;
}

void TcpConnection::deliver_input() {
  if (callbacks_->on_message) {
    callbacks_->on_message(*this, input_);
  } else {
    input_.retrieve_all();
  }
  // Consumed everything: the memory goes back to the loop until more comes.
  loop()->buffers().drain(input_);
}

void TcpConnection::deliver_waiting_input() {
  const auto open = [this] {
    return reading_ && !close_scheduled_ && (state_ == State::kConnected || state_ == State::kDisconnecting);
  };
  if (received_while_paused_) {
    received_while_paused_ = false;
    if (open() && !input_.empty()) deliver_input();
  }
  // The end comes once what came before it was delivered, and only to a
  // reader: one that paused again in the delivery is told later.
  if (eof_waiting_ && open()) {
    eof_waiting_ = false;
    handle_peer_eof();
  }
}

void TcpConnection::handle_peer_eof() {
  if (received_while_paused_ || eof_waiting_) {
    // Bytes received before the end still wait for start_reading(): the end
    // waits behind them (deliver_waiting_input), as a socket that was not
    // read would keep its FIN behind its data.
    eof_waiting_ = true;
    return;
  }
  if (!has_pending_output()) return handle_close();
  // The peer half-closed; finish writing what we owe, then close.
  peer_closed_ = true;
  stop_reading();
}

void TcpConnection::defer_callback(Deferred what) {
  const uint32_t generation = generation_;
  loop()->defer([this, generation, what] {
    if (generation != generation_) return;
    switch (what) {
      case Deferred::kWriteComplete:
        return call_write_complete();
      case Deferred::kDeliverWaitingInput:
        return deliver_waiting_input();
      case Deferred::kClose:
        return handle_close();
    }
  });
}

void TcpConnection::keep_close_error(int err) {
  // After the peer's end was read, what it sent is whole: an error of our
  // writes to it since (EPIPE, a reset) cuts nothing.
  if (peer_closed_) return;
  if (!close_scheduled_ && !disconnected()) close_error_ = static_cast<uint8_t>(std::min(err, 255));
}

void TcpConnection::fail(int err, const char* what) {
  keep_close_error(err);
  if (is_peer_error(err)) {
    TERN_LOG_DEBUG("conn {} {}: {}: {}", slot_, peer_.to_ip_port(), what, std::strerror(err));
  } else {
    TERN_LOG_WARN("conn {} {}: {}: {}", slot_, peer_.to_ip_port(), what, std::strerror(err));
  }
  close_at_round_end();
}

void TcpConnection::handle_error() {
  int err = sockets::socket_error(socket_.fd());
  fail(err != 0 ? err : EIO, "socket error");
}

void TcpConnection::close_at_round_end() {
  // Closing from inside a send() or a user callback would run the close
  // callbacks re-entrantly; instead stop all I/O now and close after the
  // round, while the object is still guaranteed to exist.
  if (close_scheduled_ || disconnected()) return;
  close_scheduled_ = true;
  state_ = State::kDisconnecting;  // no more sends are accepted
  reading_ = false;
  // No epoll_ctl: handle_close() at the end of this round closes the fd,
  // which unregisters it, and until then its events are ignored.
  channel_.mute();
  defer_callback(Deferred::kClose);
}

void TcpConnection::handle_close() {
  if (state_ == State::kDisconnected || state_ == State::kIdle) return;
  state_ = State::kDisconnected;
  reading_ = false;
  // Closing the socket (just below) takes it out of epoll: no EPOLL_CTL_DEL.
  abandon_send();
  channel_.forget();
  idle_timer_on_ = false;
  if (idle_timer_) idle_timer_->cancel();
  if (secure_) secure_->timer.cancel();
  const bool announced = !awaiting_proxy_header_ && (!secure_ || secure_->announced);
  if (callbacks_->on_connection && announced) callbacks_->on_connection(*this);
  if (callbacks_->on_close) callbacks_->on_close(*this);
  // A gate waiting for a PROXY header was not entered yet.
  if (client_ && client_->gate && !awaiting_proxy_header_) {
    client_->gate->leave(client_address());
    client_->gate.reset();
  }
  socket_.reset();
  loop()->connections().release(this);
}

}  // namespace tern::net
