// TcpConnection's output: the queue of bytes and file regions, written
// to the socket (epoll) or handed to the kernel as send requests (io_uring),
// and what happens when it drains. The rest is in tcp_connection.cc.
#include <cerrno>

#include "base/log.h"
#include "net/connection_table.h"
#include "net/event_loop.h"
#include "net/sockets.h"
#include "net/tcp_connection.h"

namespace tern::net {
namespace {

// A single sendfile(2) (or write of a mapped file) moves at most this much.
// Level-triggered, the connection then goes back to the loop, which calls it
// again at once if the socket still has room (as nginx's sendfile_max_chunk):
// one transfer never hogs a loop, and pacing the socket in steps rather than
// filling it in one call moved more bytes per second to a local reader
// (bench/compare file-64m: 256 KiB steps against 16 MiB calls).
constexpr size_t kSendfileChunk = 256 * 1024;

// Regions from this size on go to a peer on this host from a mapping
// (ConnectionCallbacks::map_files_for_local_peers): below it, mapping and
// unmapping cost more than the copy saves the reader.
constexpr size_t kMapFromBytes = 256 * 1024;

}  // namespace

void TcpConnection::send(std::string_view data) {
  loop()->assert_in_loop_thread();
  if (state_ != State::kConnected) {
    TERN_LOG_DEBUG("conn {} {}: send of {} bytes after close ignored", slot_, peer_.to_ip_port(),
                   data.size());
    return;
  }
  size_t written = 0;
  if (!has_pending_output() && !queues_for_send_request() && !encrypts()) {
    int err = 0;
    ssize_t n = sockets::write(socket_.fd(), data.data(), data.size(), &err);
    if (n < 0) {
      if (err != EAGAIN && err != EWOULDBLOCK) return fail(err, "write");
    } else {
      written = static_cast<size_t>(n);
      count_sent(written);
      if (written == data.size()) {
        if (wants_write_complete()) defer_callback(Deferred::kWriteComplete);
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
  // Bytes that would be queued whole for a send request (io_uring) take
  // the buffer's storage instead of a copy: an echo or a relayed body costs
  // no memcpy.
  loop()->assert_in_loop_thread();
  if (state_ == State::kConnected && &data != &output_ && !has_pending_output() &&
      queues_for_send_request() && !encrypts() && !data.empty()) {
    output_.swap(data);
    data.retrieve_all();
    return after_queue_grew(0);
  }
  send(data.view());
  data.retrieve_all();
}

void TcpConnection::send_file(FileRegion region) {
  loop()->assert_in_loop_thread();
  if (state_ != State::kConnected) return;
  if (region.length == 0) return;
  // Over TLS the bytes are read to be encrypted, never handed to the
  // socket: a small buffer the reads reuse beats faulting in a mapping.
  if (region.length >= kMapFromBytes && region.memory == nullptr && !secure_ &&
      callbacks_->map_files_for_local_peers && peer_is_local()) {
    (void)map_file_region(&region);  // else sendfile
  }
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

void TcpConnection::pop_sent_file() {
  // Bytes queued behind the file move up front. output_ is empty here;
  // keeping its storage (rather than swapping) spares an allocation on the
  // next response in the common case of nothing queued behind.
  Buffer& after = files_.front().after;
  if (!after.empty()) {
    loop()->buffers().fill(output_);
    output_.append(after.view());
  }
  files_.pop_front();
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
  if (secure_) total += secure_->out.readable_bytes();
  for (const PendingFile& file : files_) total += file.region.length + file.after.readable_bytes();
  return total;
}

void TcpConnection::after_queue_grew(size_t before) {
  size_t now = pending_output_bytes();
  if (before < high_water_mark_ && now >= high_water_mark_ && callbacks_->on_high_water_mark) {
    callbacks_->on_high_water_mark(*this, now);
  }
  // Encrypted, the bytes leave now: a write of ciphertext (or a send
  // request for it) has nothing to wait for.
  if (sends_by_completion() || encrypts()) return flush_output();
  if (trigger_ == TriggerMode::kLevel && !channel_.is_writing()) {
    // A file just queued behind bytes serialised in place (a response's
    // head, which flush() sends this round) while the socket is not known
    // to be full: write both now, rather than arm EPOLLOUT for that flush
    // to disarm (two epoll_ctl a response sent by sendfile).
    if (!files_.empty() && files_.back().after.empty()) return flush_output();
    channel_.enable_writing();
  }
}

void TcpConnection::handle_write() {
  if (!has_pending_output()) {
    if (trigger_ == TriggerMode::kLevel && channel_.is_writing()) channel_.disable_writing();
    return;
  }
  flush_output();
}

void TcpConnection::flush_output() {
  if (encrypts()) return secure_flush();
  int err = 0;
  size_t turn = 0;  // file bytes written in this call
  for (;;) {
    // The kernel has bytes of ours: what follows them waits for its report.
    if (send_in_flight_) return;
    // Kernel TLS: records the layer made (a ticket, an alert) go first.
    if (secure_ && !secure_->out.empty()) {
      if (!send_clear_records(&err)) break;
      continue;
    }
    // A head before a file goes by a plain write too: the file is sent
    // by sendfile right after it, not after a completion's round trip.
    if (!output_.empty() && sends_by_completion() && files_.empty()) return schedule_send();
    if (!output_.empty()) {
      ssize_t n = sockets::write(socket_.fd(), output_.peek(), output_.readable_bytes(), &err,
                                 holds_for_more());
      if (n < 0) break;
      output_.retrieve(static_cast<size_t>(n));
      count_sent(static_cast<uint64_t>(n));
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
      // The file is shorter than promised (truncated while we send): sendfile
      // finds its end, a write from the mapping a page no longer there. The
      // peer was told a length we cannot deliver: the stream is broken.
      const bool cut_short = n == 0 || (n < 0 && err == EFAULT && region.memory != nullptr);
      if (n < 0 && !cut_short) break;
      if (cut_short) {
        TERN_LOG_WARN("conn {} {}: file fd {} ended {} bytes early, closing", slot_,
                      peer_.to_ip_port(), region.fd, region.length);
        return close_at_round_end();
      }
      region.length -= static_cast<size_t>(n);
      count_sent(static_cast<uint64_t>(n));
      if (region.length > 0) {
        if (static_cast<size_t>(n) < chunk) break;  // the socket buffer is full
        // Edge-triggered, no new edge comes while the socket has room: go
        // on, for a turn.
        if (trigger_ == TriggerMode::kLevel) break;
        turn += static_cast<size_t>(n);
        if (turn >= kWriteTurn) return yield_writing();
        continue;
      }
      pop_sent_file();
    } else if (secure_ && secure_wants_to_close()) {
      continue;  // the closing alert first
    } else {
      return output_drained();
    }
  }
  if (err != 0 && err != EAGAIN && err != EWOULDBLOCK) return fail(err, "write");
  // The socket is full. Kernel TLS (Linux 6.1) may have handed TCP its
  // last record with MSG_MORE (sendfile's pages but the last) and returned
  // without pushing it: nothing would be sent, no room ever freed.
  if (secure_ && secure_->kernel) sockets::push_pending(socket_.fd());
  if (trigger_ == TriggerMode::kLevel && !channel_.is_writing()) channel_.enable_writing();
}

bool TcpConnection::sends_by_completion() const {
  return loop()->poller().can_send(channel_);
}

bool TcpConnection::queues_for_send_request() const {
  // A connection that reads for itself (large pieces, io_uring) writes at
  // once, as with epoll: the bytes leave while they are in cache, and the
  // buffer goes back to the pool for the next read, where a send request
  // would hold it until its completion (a buffer per connection in flight,
  // more than the pool keeps).
  return sends_by_completion() && !channel_.reads_itself();
}

void TcpConnection::schedule_send() {
  // At the end of the round, so that what the round adds (a pipelined
  // batch's responses, a body after its head) leaves in one send.
  if (send_scheduled_) return;
  send_scheduled_ = true;
  // This and the generation fit std::function's inline storage: no
  // allocation.
  const uint32_t generation = generation_;
  loop()->defer([this, generation] {
    if (generation == generation_) submit_send();
  });
}

void TcpConnection::yield_writing() {
  if (trigger_ == TriggerMode::kLevel) {
    // The socket has room: the next poll reports it again.
    if (!channel_.is_writing()) channel_.enable_writing();
    return;
  }
  if (write_yielded_) return;
  write_yielded_ = true;
  // After the poll (posted work runs then, and work posted while it runs
  // wakes the next one): the connections writing at once take turns.
  loop()->queue_in_loop([id = id()] {
    TcpConnection* conn = id.loop->connections().find(id);
    if (conn == nullptr) return;
    conn->write_yielded_ = false;
    if (!conn->close_scheduled_ && conn->has_pending_output()) conn->flush_output();
  });
}

void TcpConnection::submit_send() {
  send_scheduled_ = false;
  if (close_scheduled_ || (state_ != State::kConnected && state_ != State::kDisconnecting)) return;
  // What leaves: the plaintext queue, or an encrypted connection's ciphertext.
  Buffer& wire = encrypts() ? secure_->out : output_;
  if (send_in_flight_ || wire.empty()) return;
  if (!sends_by_completion()) return flush_output();  // unregistered meanwhile
  // The bytes go to the kernel as they are; what is appended from now on
  // queues behind them in a fresh buffer.
  sending_.swap(wire);
  start_send();
}

void TcpConnection::start_send() {
  send_in_flight_ = true;
  // Plain bytes only: ciphertext goes in whole records (see secure_flush),
  // and with kernel TLS a send request the kernel completes in part could
  // leave its record held back for more (see flush_output).
  const bool more = !secure_ && holds_for_more();
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
  count_sent(static_cast<uint64_t>(n));
  if (!sending_.empty()) return start_send();  // the socket took part of it
  // The storage goes back to what fills it (a large file's next step needs
  // as much), else to the pool.
  Buffer& wire = encrypts() ? secure_->out : output_;
  if (wire.capacity() == 0) {
    wire.swap(sending_);
  } else {
    loop()->buffers().drain(sending_);
  }
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
  if (wants_write_complete()) defer_callback(Deferred::kWriteComplete);
  if (peer_closed_ || close_after_write_) return close_at_round_end();
  if (state_ == State::kDisconnecting) return (void)sockets::shutdown_write(socket_.fd());
  if (secure_) secure_idle();
}

bool TcpConnection::wants_write_complete() const {
  return callbacks_->on_write_complete &&
         (!callbacks_->write_complete_when_asked || write_complete_asked_);
}

void TcpConnection::ask_write_complete() {
  loop()->assert_in_loop_thread();
  if (write_complete_asked_) return;
  write_complete_asked_ = true;
  if (!has_pending_output()) defer_callback(Deferred::kWriteComplete);
}

void TcpConnection::call_write_complete() {
  if (!wants_write_complete()) return;  // already called for this request
  write_complete_asked_ = false;
  if (state_ == State::kConnected || state_ == State::kDisconnecting) {
    callbacks_->on_write_complete(*this);
  }
}

}  // namespace tern::net
