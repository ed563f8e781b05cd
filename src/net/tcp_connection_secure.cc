// TcpConnection's encrypted side: a SecureLayer (TLS) between the socket and
// the plaintext queues. Received bytes go through the layer into input_;
// queued output (bytes and file regions) is encrypted a step at a time into
// the ciphertext buffer, which leaves as plain output does (a write with
// epoll, a send request with io_uring). Once a layer hands its sending to
// kernel TLS (SecureLayer::kernel_sends()), output is the plain path's
// (tcp_connection_output.cc: bytes written, files by sendfile) and only the
// records the layer still makes go through here (send_clear_records). See
// tcp_connection.h.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/assert.h"
#include "base/log.h"
#include "net/buffer_pool.h"
#include "net/event_loop.h"
#include "net/sockets.h"
#include "net/tcp_connection.h"

namespace tern::net {
namespace {

// Plaintext encrypted in one step: the most ciphertext a connection holds
// while the socket is full (beside less than kEncryptLowWater left from the
// step before, plus a record's overhead per 16 KiB), whatever
// the size of the file it sends.
constexpr size_t kEncryptStep = 64 * 1024;
// More is encrypted once less than this is left to write: what is left
// moves to the front of the buffer first, so it should be little.
constexpr size_t kEncryptLowWater = 16 * 1024;
// A TLS record's header: type, version, length.
constexpr size_t kRecordHeader = 5;
// The most a record adds to its 16 KiB of plaintext under the ciphers we
// offer (TLS 1.2 GCM: header, explicit nonce, tag; TLS 1.3: header, type,
// tag), rounded up; a record with more only makes the buffer grow.
constexpr size_t kRecordOverhead = 64;
constexpr size_t kRecordPlaintext = 16 * 1024;

// A request that comes this soon after the response before it marks a
// client sending back to back (a load balancer, a benchmark, a pipeline of
// fetches): its connection keeps the layer's buffers between requests
// until it has been quiet for kKeepBuffers. Any other gives them back as
// soon as its response is written.
constexpr uint64_t kBackToBackMs = 10;
constexpr std::chrono::milliseconds kKeepBuffers{1000};

// Room for the ciphertext of `n` bytes of plaintext, so that a step's
// records land in the buffer without it growing (and copying) on the way.
size_t ciphertext_room(size_t n) {
  return n + (n / kRecordPlaintext + 1) * kRecordOverhead;
}

// Makes that room in `out`, in the loop's pooled storage when `out` has none:
// grown from nothing it would be just big enough for one small response.
void make_ciphertext_room(BufferPool& pool, Buffer& out, size_t plaintext) {
  pool.fill(out);
  out.ensure_writable(ciphertext_room(plaintext));
}

// File bytes on their way to the layer: one area per loop thread, filled and
// encrypted in the same step, so a connection holds no file bytes of its own.
char* file_scratch() {
  thread_local std::unique_ptr<char[]> scratch(new char[kEncryptStep]);
  return scratch.get();
}

const char* status_name(SecureLayer::Status status) {
  switch (status) {
    case SecureLayer::Status::kOk: return "ok";
    case SecureLayer::Status::kPeerClosed: return "closed by the peer";
    case SecureLayer::Status::kFinish: return "refused";
    case SecureLayer::Status::kFailed: return "failed";
  }
  return "?";
}

}  // namespace

void TcpConnection::use_secure_layer(std::unique_ptr<SecureLayer> layer,
                                     std::chrono::milliseconds handshake_timeout, bool client) {
  TERN_DCHECK(state_ == State::kConnected && !secure_ && layer);
  secure_ = std::make_unique<SecureState>(this);
  secure_->layer = std::move(layer);
  secure_->client = client;
  secure_->announced = !client;
  secure_->timer.arm(handshake_timeout);
}

void TcpConnection::secure_start() {
  SecureState& s = *secure_;
  loop()->buffers().fill(s.out);
  if (s.layer->start(s.out) != SecureLayer::Status::kOk) {
    TERN_LOG_DEBUG("conn {} {}: TLS handshake could not begin: {}", slot_, peer_.to_ip_port(), s.layer->error());
    return close_at_round_end();
  }
  secure_flush();
}

std::string TcpConnection::secure_handshake_failure() const {
  if (!secure_ || secure_->layer->established()) return {};
  if (secure_->timed_out) return "TLS handshake: not over in time";
  const std::string_view error = secure_->layer->error();
  return error.empty() ? "TLS handshake: the connection closed" : "TLS handshake: " + std::string(error);
}

void TcpConnection::secure_idle() {
  // All is written (a response, or a flight of the handshake, which waits a
  // round trip for the peer's next). The layer's buffers (OpenSSL's record
  // buffers, about 34 KiB) go back now, or, for a connection whose requests
  // come back to back, once it has been quiet for kKeepBuffers; 10,000
  // idle connections hold none of them.
  // Bytes still waiting (a request written back while it is delivered,
  // a pipelined one) do not stop it: the layer keeps what it holds.
  SecureState& s = *secure_;
  if (s.requested) s.idle_since_ms = loop()->clock().now_ms();
  if (s.back_to_back) return s.timer.arm(kKeepBuffers);
  s.layer->release_buffers();
}

void TcpConnection::secure_timer_fired(void* self) {
  auto* conn = static_cast<TcpConnection*>(self);
  if (conn->disconnected() || !conn->secure_) return;
  if (conn->secure_->layer->established()) {
    // Quiet for kKeepBuffers (the layer keeps what it still holds).
    conn->secure_->layer->release_buffers();
    return;
  }
  TERN_LOG_DEBUG("conn {} {}: TLS handshake not over in time, closing", conn->slot_,
                 conn->peer_.to_ip_port());
  conn->secure_->timed_out = true;
  conn->force_close();
}

void TcpConnection::secure_read() {
  // As handle_read, but into the ciphertext buffer and through the layer
  // after each read: one read per event level-triggered; edge-triggered,
  // until the socket is drained or the application stops reading.
  Buffer& in = secure_->in;
  for (;;) {
    int err = 0;
    size_t offered = 0;
    loop()->buffers().fill(in);
    ssize_t n = in.read_fd(socket_.fd(), &err, &offered);
    if (n > 0) {
      count_received(static_cast<uint64_t>(n));
      secure_input();
      if (trigger_ == TriggerMode::kLevel || !reading_ || disconnected() || close_scheduled_ ||
          drained(static_cast<size_t>(n), offered)) {
        return;
      }
      continue;
    }
    if (n == 0) {
      if (!in.empty()) secure_input();
      loop()->buffers().drain(in);
      if (disconnected() || close_scheduled_) return;
      return handle_peer_eof();
    }
    if (!in.empty()) secure_input();
    loop()->buffers().drain(in);
    if (err == EAGAIN || err == EWOULDBLOCK) return;
    if (disconnected() || close_scheduled_) return;
    return fail(err, "read");
  }
}

void TcpConnection::secure_received(const char* data, size_t n) {
  loop()->buffers().fill(secure_->in);
  secure_->in.append(data, n);
  secure_input();
}

void TcpConnection::secure_input() {
  SecureState& s = *secure_;
  const bool was_established = s.layer->established();
  const size_t plain_before = input_.readable_bytes();
  loop()->buffers().fill(input_);
  if (!was_established) s.layer->offer_socket(send_in_flight_ ? -1 : socket_.fd());
  if (was_established) {
    s.back_to_back = s.idle_since_ms != 0 && loop()->clock().now_ms() - s.idle_since_ms <= kBackToBackMs;
    s.idle_since_ms = 0;
  }
  const SecureLayer::Status status = s.layer->receive(s.in, input_, s.out);
  loop()->buffers().drain(s.in);
  if (!was_established) {
    if (const size_t written = s.layer->take_written(); written > 0) count_sent(written);
    if (!s.kernel && s.layer->kernel_sends()) {
      s.kernel = true;
      TERN_LOG_DEBUG("conn {} {}: kernel TLS sends from here", slot_, peer_.to_ip_port());
    }
  }
  if (status == SecureLayer::Status::kFailed) {
    TERN_LOG_DEBUG("conn {} {}: TLS {}", slot_, peer_.to_ip_port(), status_name(status));
    loop()->buffers().drain(input_);
    keep_close_error(EPROTO);  // what came may have been cut: not a clean end
    return close_at_round_end();
  }
  if (status == SecureLayer::Status::kFinish) {
    // Its last words (an alert, or the answer to plain HTTP), then the end.
    TERN_LOG_DEBUG("conn {} {}: TLS {}", slot_, peer_.to_ip_port(), status_name(status));
    keep_close_error(EPROTO);
    input_.retrieve_all();
    loop()->buffers().drain(input_);
    output_.retrieve_all();
    files_.clear();
    reading_ = false;
    channel_.disable_reading();
    close_after_write_ = true;
    state_ = State::kDisconnecting;
    return secure_flush();
  }
  if (!was_established && s.layer->established()) {
    s.timer.cancel();
    TERN_LOG_DEBUG("conn {} {}: {} {}{}{}", slot_, peer_.to_ip_port(), s.layer->protocol(),
                   s.layer->cipher(), s.layer->resumed() ? " (resumed)" : "",
                   s.layer->server_name().empty() ? std::string()
                                                  : " for " + std::string(s.layer->server_name()));
    if (!s.announced) {
      // A client's connection is the user's from here.
      s.announced = true;
      if (callbacks_->on_connection) callbacks_->on_connection(*this);
      if (disconnected() || close_scheduled_) return;
    }
  }
  // Handshake records (a TLS 1.3 ticket), and output that waited for the
  // handshake. Where a request came with the handshake's last message, they
  // wait for its response and leave in its write.
  const bool plaintext_came = input_.readable_bytes() > plain_before;
  if (plaintext_came) s.requested = true;
  const bool held = reading_ && plaintext_came && has_pending_output();
  if (has_pending_output() && !held) secure_flush();
  if (disconnected() || close_scheduled_) return;
  if (plaintext_came) {
    if (reading_) {
      deliver_input();
      // No response yet (it comes later, or not at all): they go alone.
      if (held && !disconnected() && !close_scheduled_ && has_pending_output()) secure_flush();
    } else {
      received_while_paused_ = true;  // delivered by start_reading()
    }
  } else if (input_.empty()) {
    loop()->buffers().drain(input_);
  }
  if (status == SecureLayer::Status::kPeerClosed && !disconnected() && !close_scheduled_) {
    handle_peer_eof();
  }
}

bool TcpConnection::secure_encrypt_more() {
  // Plaintext in order: bytes, then each file region and the bytes queued
  // behind it. False when a file turned out shorter than promised.
  SecureState& s = *secure_;
  while (s.out.readable_bytes() < kEncryptLowWater) {
    if (!output_.empty()) {
      const size_t step = std::min(output_.readable_bytes(), kEncryptStep);
      make_ciphertext_room(loop()->buffers(), s.out, step);
      if (s.layer->send(output_.peek(), step, s.out) != SecureLayer::Status::kOk) return false;
      output_.retrieve(step);
      continue;
    }
    if (files_.empty()) break;
    FileRegion& region = files_.front().region;
    if (region.length > 0) {
      const size_t step = std::min(region.length, kEncryptStep);
      const char* data = nullptr;
      ssize_t n;
      if (region.memory != nullptr) {
        // A mapping: a page cut off by a truncation would fault here, so
        // the size is checked first (a mapping is only made of a regular file).
        struct stat st;
        n = ::fstat(region.fd, &st) == 0 && st.st_size >= region.offset + static_cast<off_t>(step)
                ? static_cast<ssize_t>(step)
                : 0;
        data = region.memory + region.offset;
      } else {
        n = ::pread(region.fd, file_scratch(), step, region.offset);
        data = file_scratch();
      }
      if (n <= 0) {
        TERN_LOG_WARN("conn {} {}: file fd {} ended {} bytes early, closing", slot_,
                      peer_.to_ip_port(), region.fd, region.length);
        return false;
      }
      make_ciphertext_room(loop()->buffers(), s.out, static_cast<size_t>(n));
      if (s.layer->send(data, static_cast<size_t>(n), s.out) != SecureLayer::Status::kOk) return false;
      region.offset += n;
      region.length -= static_cast<size_t>(n);
      continue;
    }
    pop_sent_file();
  }
  if (output_.empty()) loop()->buffers().drain(output_);
  return true;
}

void TcpConnection::secure_flush() {
  SecureState& s = *secure_;
  if (s.kernel) return flush_output();
  int err = 0;
  size_t turn = 0;  // bytes written in this call
  for (;;) {
    if (send_in_flight_) return;
    // Plaintext waits for the handshake; the handshake's records do not.
    if (s.layer->established() && !close_scheduled_ && !secure_encrypt_more()) {
      return close_at_round_end();
    }
    if (s.out.empty()) {
      loop()->buffers().drain(s.out);  // an idle connection holds no buffer
      if (!s.layer->established() && (!output_.empty() || !files_.empty())) return;
      if (secure_wants_to_close()) continue;
      return output_drained();
    }
    // The last bytes before a close take the closing alert along: one
    // write, not two.
    if (output_.empty() && files_.empty()) (void)secure_wants_to_close();
    if (sends_by_completion()) return schedule_send();
    // Without MSG_MORE: a step's ciphertext is whole records of 16 KiB, and
    // a tail held back for the next step costs the kernel a second push of
    // every write (about a tenth of the CPU time of a large file).
    ssize_t n = sockets::write(socket_.fd(), s.out.peek(), s.out.readable_bytes(), &err);
    if (n < 0) break;
    s.out.retrieve(static_cast<size_t>(n));
    count_sent(static_cast<uint64_t>(n));
    if (!s.out.empty()) break;  // the socket buffer is full
    // A body still to encrypt keeps the storage for its next step.
    if (output_.empty() && files_.empty()) {
      loop()->buffers().drain(s.out);
    } else if ((turn += static_cast<size_t>(n)) >= kWriteTurn) {
      return yield_writing();
    }
  }
  if (err != 0 && err != EAGAIN && err != EWOULDBLOCK) return fail(err, "write");
  if (trigger_ == TriggerMode::kLevel && !channel_.is_writing()) channel_.enable_writing();
}

bool TcpConnection::send_clear_records(int* err) {
  // Kernel TLS: each record the layer made after the switch goes with its
  // type, and the kernel encrypts it. False when the socket is full.
  Buffer& out = secure_->out;
  while (out.readable_bytes() >= kRecordHeader) {
    const auto* header = reinterpret_cast<const uint8_t*>(out.peek());
    const uint8_t type = header[0];
    const size_t length = (size_t{header[3]} << 8) | header[4];
    TERN_DCHECK(out.readable_bytes() >= kRecordHeader + length);
    const ssize_t n = sockets::send_record(socket_.fd(), type, out.peek() + kRecordHeader, length, err);
    if (n < 0) return false;
    count_sent(static_cast<uint64_t>(n));
    out.retrieve(kRecordHeader + static_cast<size_t>(n));
    if (static_cast<size_t>(n) < length) {
      // The rest goes as a record of its own once the socket has room.
      const size_t rest = length - static_cast<size_t>(n);
      const uint8_t again[kRecordHeader] = {type, 3, 3, static_cast<uint8_t>(rest >> 8), static_cast<uint8_t>(rest)};
      out.prepend(again, sizeof again);
      *err = EAGAIN;
      return false;
    }
  }
  loop()->buffers().drain(out);
  return true;
}

bool TcpConnection::secure_wants_to_close() {
  // Everything is written and the connection is to close or half-close:
  // first the closing alert, so the peer knows the stream was not cut.
  SecureState& s = *secure_;
  if (s.close_sent || !s.layer->established() || peer_closed_) return false;
  if (!close_after_write_ && state_ != State::kDisconnecting) return false;
  s.close_sent = true;
  loop()->buffers().fill(s.out);
  s.layer->close(s.out);
  return !s.out.empty();
}

}  // namespace tern::net
