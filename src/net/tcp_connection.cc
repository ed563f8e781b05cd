#include "net/tcp_connection.h"

#include <cerrno>
#include <cstring>

#include "base/assert.h"
#include "base/log.h"
#include "net/connection_table.h"
#include "net/event_loop.h"
#include "net/sockets.h"

namespace tern::net {
namespace {

// A single sendfile(2) (or write of a mapped file) moves at most this much.
// Level-triggered, the connection then goes back to the loop, which calls it
// again at once if the socket still has room (as nginx's sendfile_max_chunk):
// one transfer never hogs a loop, and pacing the socket in steps rather than
// filling it in one call moved more bytes per second to a local reader
// (bench/compare file-64m: 256 KiB steps against 16 MiB calls).
constexpr size_t kSendfileChunk = 256 * 1024;

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
    : channel_(loop, -1), slot_(slot) {
  channel_.set_handler(&kChannelHandler, this);
}

TcpConnection::~TcpConnection() {
  // Only the loop's ConnectionTable destroys connections, on the loop thread,
  // either pooled ones or, at loop shutdown, live ones (without callbacks).
  if (state_ != State::kIdle && state_ != State::kDisconnected) {
    if (idle_timer_) idle_timer_->cancel();
    abandon_send();
    channel_.remove();
  }
}

void TcpConnection::open(Socket socket, const InetAddress& peer,
                         const ConnectionCallbacks* callbacks, const void* owner,
                         TriggerMode trigger) {
  TERN_DCHECK(state_ == State::kIdle);
  socket_ = std::move(socket);
  channel_.reset(socket_.fd());
  local_known_ = false;
  peer_ = peer;
  callbacks_ = callbacks;
  owner_ = owner;
  trigger_ = trigger;
  high_water_mark_ = callbacks->high_water_mark;
  state_ = State::kConnected;
}

const InetAddress& TcpConnection::local_address() const {
  if (!local_known_ && socket_.valid()) {
    local_ = sockets::local_address(socket_.fd());
    local_known_ = true;
  }
  return local_;
}

void TcpConnection::establish(bool input_waiting) {
  loop()->assert_in_loop_thread();
  TERN_CHECK(state_ == State::kConnected);
  reading_ = true;
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
  context_.reset();
  callbacks_ = nullptr;
  owner_ = nullptr;
  reading_ = peer_closed_ = close_scheduled_ = close_after_write_ = write_complete_asked_ = false;
  received_while_paused_ = send_in_flight_ = send_scheduled_ = false;
  idle_timeout_ = std::chrono::milliseconds(0);
  idle_timer_on_ = false;
  if (idle_timer_) idle_timer_->cancel();
  bytes_received_ = bytes_sent_ = 0;
}

void TcpConnection::send(std::string_view data) {
  loop()->assert_in_loop_thread();
  if (state_ != State::kConnected) {
    TERN_LOG_DEBUG("conn {} {}: send of {} bytes after close ignored", slot_, peer_.to_ip_port(),
                   data.size());
    return;
  }
  size_t written = 0;
  if (!has_pending_output() && !sends_by_completion()) {
    int err = 0;
    ssize_t n = sockets::write(socket_.fd(), data.data(), data.size(), &err);
    if (n < 0) {
      if (err != EAGAIN && err != EWOULDBLOCK) return fail(err, "write");
    } else {
      written = static_cast<size_t>(n);
      bytes_sent_ += written;
      note_activity(written);
      if (written == data.size()) {
        if (wants_write_complete()) defer_callback(&TcpConnection::call_write_complete);
        return;
      }
    }
  }
  size_t before = pending_output_bytes();
  if (files_.empty()) loop()->buffers().fill(output_);
  output_tail().append(data.data() + written, data.size() - written);
  after_queue_grew(before);
}

void TcpConnection::send(Buffer& data) {
  send(data.view());
  data.retrieve_all();
}

void TcpConnection::send_file(FileRegion region) {
  loop()->assert_in_loop_thread();
  if (state_ != State::kConnected) return;
  if (region.length == 0) return;
  size_t before = pending_output_bytes();
  files_.push_back(PendingFile{std::move(region), Buffer(0)});
  if (before == 0) {
    flush_output();
  } else {
    after_queue_grew(before);
  }
}

Buffer& TcpConnection::output_tail_buffer() {
  loop()->assert_in_loop_thread();
  Buffer& tail = output_tail();
  if (&tail == &output_) loop()->buffers().fill(output_);
  return tail;
}

void TcpConnection::flush() {
  loop()->assert_in_loop_thread();
  if (state_ != State::kConnected && state_ != State::kDisconnecting) return;
  if (close_scheduled_ || !has_pending_output()) return;
  // Writing when a level-triggered channel already waits for EPOLLOUT is
  // only early, not wrong: the queue keeps its order either way.
  flush_output();
}

size_t TcpConnection::pending_output_bytes() const {
  loop()->assert_in_loop_thread();
  size_t total = sending_.readable_bytes() + output_.readable_bytes();
  for (const PendingFile& file : files_) total += file.region.length + file.after.readable_bytes();
  return total;
}

void TcpConnection::after_queue_grew(size_t before) {
  size_t now = pending_output_bytes();
  if (before < high_water_mark_ && now >= high_water_mark_ && callbacks_->on_high_water_mark) {
    callbacks_->on_high_water_mark(*this, now);
  }
  if (sends_by_completion()) return flush_output();
  if (trigger_ == TriggerMode::kLevel && !channel_.is_writing()) channel_.enable_writing();
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
  // For edge-triggered channels EPOLL_CTL_MOD re-checks readiness, so input
  // that arrived while we were not reading is reported again.
  channel_.enable_reading();
  // Bytes received for us while paused (io_uring) are handed over after
  // this round, not from inside the caller.
  if (received_while_paused_) defer_callback(&TcpConnection::deliver_waiting_input);
}

void TcpConnection::stop_reading() {
  loop()->assert_in_loop_thread();
  if (!reading_) return;
  reading_ = false;
  channel_.disable_reading();
}

void TcpConnection::set_idle_timeout(std::chrono::milliseconds timeout) {
  loop()->assert_in_loop_thread();
  idle_timeout_ = timeout;
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
                 conn->idle_timeout_.count());
  conn->handle_close();
}

void TcpConnection::set_high_water_mark(size_t bytes) {
  loop()->assert_in_loop_thread();
  high_water_mark_ = bytes;
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

void TcpConnection::note_activity(size_t bytes) {
  loop()->load().bytes_this_period += bytes;
  if (idle_timer_on_) idle_timer_->arm(idle_timeout_);
}

void TcpConnection::handle_read() {
  // Level-triggered: one read per event, the loop comes back if more is
  // waiting. Edge-triggered: read until the socket is drained or the
  // application stops reading.
  for (;;) {
    int err = 0;
    size_t offered = 0;
    loop()->buffers().fill(input_);
    ssize_t n = input_.read_fd(socket_.fd(), &err, &offered);
    if (n > 0) {
      bytes_received_ += static_cast<uint64_t>(n);
      note_activity(static_cast<size_t>(n));
      deliver_input();
      if (trigger_ == TriggerMode::kLevel || !reading_ || disconnected() || close_scheduled_ ||
          static_cast<size_t>(n) < offered) {
        return;
      }
      continue;
    }
    loop()->buffers().drain(input_);
    if (n == 0) return handle_peer_eof();
    if (err == EAGAIN || err == EWOULDBLOCK) return;
    return fail(err, "read");
  }
}

void TcpConnection::handle_received(const char* data, ssize_t n) {
  // Bytes the poller received for us (io_uring). A closing connection drops
  // them, as a read would not have happened.
  if (close_scheduled_ || (state_ != State::kConnected && state_ != State::kDisconnecting)) return;
  if (n < 0) return fail(static_cast<int>(-n), "recv");
  if (n == 0) return handle_peer_eof();
  bytes_received_ += static_cast<uint64_t>(n);
  note_activity(static_cast<size_t>(n));
  loop()->buffers().fill(input_);
  input_.append(data, static_cast<size_t>(n));
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
  if (!received_while_paused_) return;
  received_while_paused_ = false;
  if (reading_ && !input_.empty() && !close_scheduled_ &&
      (state_ == State::kConnected || state_ == State::kDisconnecting)) {
    deliver_input();
  }
}

void TcpConnection::handle_peer_eof() {
  if (!has_pending_output()) return handle_close();
  // The peer half-closed; finish writing what we owe, then close.
  peer_closed_ = true;
  stop_reading();
}

void TcpConnection::handle_write() {
  if (!has_pending_output()) {
    if (trigger_ == TriggerMode::kLevel && channel_.is_writing()) channel_.disable_writing();
    return;
  }
  flush_output();
}

void TcpConnection::flush_output() {
  int err = 0;
  for (;;) {
    // The kernel has bytes of ours: what follows them waits for its report.
    if (send_in_flight_) return;
    if (!output_.empty() && sends_by_completion()) return schedule_send();
    if (!output_.empty()) {
      // A head before a file, or the last bytes before a close: hold a
      // short tail for the file's first bytes or the FIN.
      const bool more = !files_.empty() || close_after_write_;
      ssize_t n =
          sockets::write(socket_.fd(), output_.peek(), output_.readable_bytes(), &err, more);
      if (n < 0) break;
      output_.retrieve(static_cast<size_t>(n));
      bytes_sent_ += static_cast<uint64_t>(n);
      note_activity(static_cast<size_t>(n));
      if (!output_.empty()) break;  // the socket buffer is full
    } else if (!files_.empty()) {
      FileRegion& region = files_.front().region;
      size_t chunk = region.length < kSendfileChunk ? region.length : kSendfileChunk;
      ssize_t n;
      if (region.memory != nullptr) {
        const bool more = close_after_write_ || files_.size() > 1 || !files_.front().after.empty();
        n = sockets::write(socket_.fd(), region.memory + region.offset, chunk, &err, more);
        if (n > 0) region.offset += n;
      } else {
        n = sockets::sendfile(socket_.fd(), region.fd, &region.offset, chunk, &err);
      }
      if (n < 0) break;
      if (n == 0) {
        // The file is shorter than promised (truncated while we send). The
        // peer was told a length we cannot deliver: the stream is broken.
        TERN_LOG_WARN("conn {} {}: file fd {} ended {} bytes early, closing", slot_,
                      peer_.to_ip_port(), region.fd, region.length);
        return close_at_round_end();
      }
      region.length -= static_cast<size_t>(n);
      bytes_sent_ += static_cast<uint64_t>(n);
      note_activity(static_cast<size_t>(n));
      if (region.length > 0) {
        if (static_cast<size_t>(n) < chunk) break;  // the socket buffer is full
        // Edge-triggered, no new edge comes while the socket has room: go on.
        if (trigger_ == TriggerMode::kLevel) break;
        continue;
      }
      // Bytes queued behind the file move up front. output_ is empty here;
      // keeping its storage (rather than swapping) spares an allocation on
      // the next response in the common case of nothing queued behind.
      Buffer& after = files_.front().after;
      if (!after.empty()) {
        loop()->buffers().fill(output_);
        output_.append(after.view());
      }
      files_.erase(files_.begin());
    } else {
      return output_drained();
    }
  }
  if (err != 0 && err != EAGAIN && err != EWOULDBLOCK) return fail(err, "write");
  if (trigger_ == TriggerMode::kLevel && !channel_.is_writing()) channel_.enable_writing();
}

bool TcpConnection::sends_by_completion() const {
  return loop()->poller().can_send(channel_);
}

void TcpConnection::schedule_send() {
  // At the end of the round, so that what the round adds (a pipelined
  // batch's responses, a body after its head) leaves in one send.
  if (send_scheduled_) return;
  send_scheduled_ = true;
  // Captures no member pointer (as defer_callback does): this and the
  // generation fit std::function's inline storage, so no allocation.
  const uint32_t generation = generation_;
  loop()->defer([this, generation] {
    if (generation == generation_) submit_send();
  });
}

void TcpConnection::submit_send() {
  send_scheduled_ = false;
  if (close_scheduled_ || (state_ != State::kConnected && state_ != State::kDisconnecting)) return;
  if (send_in_flight_ || output_.empty()) return;
  if (!sends_by_completion()) return flush_output();  // unregistered meanwhile
  // output_ goes to the kernel as it is; what is appended from now on
  // queues behind it in a fresh output_.
  sending_.swap(output_);
  start_send();
}

void TcpConnection::start_send() {
  send_in_flight_ = true;
  const bool more = !files_.empty() || close_after_write_;
  loop()->poller().start_send(channel_, sending_.peek(), sending_.readable_bytes(), more);
}

void TcpConnection::handle_sent(ssize_t n) {
  send_in_flight_ = false;
  if (close_scheduled_ || (state_ != State::kConnected && state_ != State::kDisconnecting)) return;
  if (n < 0) {
    sending_.retrieve_all();
    return fail(static_cast<int>(-n), "send");
  }
  sending_.retrieve(static_cast<size_t>(n));
  bytes_sent_ += static_cast<uint64_t>(n);
  note_activity(static_cast<size_t>(n));
  if (!sending_.empty()) return start_send();  // the socket took part of it
  loop()->buffers().drain(sending_);
  flush_output();
}

void TcpConnection::abandon_send() {
  if (!send_in_flight_) return;
  send_in_flight_ = false;
  loop()->poller().abandon_send(channel_, std::move(sending_));
  sending_ = Buffer(0);
}

void TcpConnection::output_drained() {
  loop()->buffers().drain(output_);
  if (trigger_ == TriggerMode::kLevel && channel_.is_writing()) channel_.disable_writing();
  if (wants_write_complete()) defer_callback(&TcpConnection::call_write_complete);
  if (peer_closed_ || close_after_write_) return close_at_round_end();
  if (state_ == State::kDisconnecting) (void)sockets::shutdown_write(socket_.fd());
}

bool TcpConnection::wants_write_complete() const {
  return callbacks_->on_write_complete &&
         (!callbacks_->write_complete_when_asked || write_complete_asked_);
}

void TcpConnection::ask_write_complete() {
  loop()->assert_in_loop_thread();
  if (write_complete_asked_) return;
  write_complete_asked_ = true;
  if (!has_pending_output()) defer_callback(&TcpConnection::call_write_complete);
}

void TcpConnection::call_write_complete() {
  if (!wants_write_complete()) return;  // already called for this request
  write_complete_asked_ = false;
  if (state_ == State::kConnected || state_ == State::kDisconnecting) {
    callbacks_->on_write_complete(*this);
  }
}

void TcpConnection::defer_callback(void (TcpConnection::*method)()) {
  const uint32_t generation = generation_;
  loop()->defer([this, generation, method] {
    if (generation == generation_) (this->*method)();
  });
}

void TcpConnection::fail(int err, const char* what) {
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
  defer_callback(&TcpConnection::handle_close);
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
  if (callbacks_->on_connection) callbacks_->on_connection(*this);
  if (callbacks_->on_close) callbacks_->on_close(*this);
  socket_.reset();
  loop()->connections().release(this);
}

}  // namespace tern::net
