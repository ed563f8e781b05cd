// http2::Session's output: the frames made while reading (answers,
// HEADERS, RST_STREAM) in order, then DATA frames as the client's windows
// allow, a frame per ready stream in turn; and the credit that reopens
// the client's windows as handlers take its body. See session.h.
#include "http2/session.h"

#include <algorithm>

#include "http2/frame_writer.h"

namespace tern::http2 {
namespace {

// The least a DATA frame carries when send()'s budget is nearly spent.
constexpr size_t kSmallestDataFrame = 4096;
// Frames made for a client that does not read them (answers to its PINGs
// and SETTINGS, heads of its requests) past which it is cut off.
constexpr size_t kMaxPendingFrames = 1024 * 1024;
// The room for those frames an idle connection keeps.
constexpr size_t kKeptPendingRoom = 1024;

}  // namespace

void Session::greet() {
  write_settings(pending_, {
                               {SettingId::kMaxConcurrentStreams, limits_.max_concurrent_streams},
                               {SettingId::kInitialWindowSize, limits_.stream_window},
                               {SettingId::kMaxHeaderListSize, static_cast<uint32_t>(limits_.parser.max_head_bytes)},
                           });
  if (limits_.connection_window > kDefaultInitialWindowSize) {
    write_window_update(pending_, 0, limits_.connection_window - kDefaultInitialWindowSize);
  }
}

void Session::credit_connection(size_t bytes) {
  uncredited_ += bytes;
  const size_t window = std::max<size_t>(limits_.connection_window, kDefaultInitialWindowSize);
  if (uncredited_ < window / 2) return;
  write_window_update(pending_, 0, static_cast<uint32_t>(uncredited_));
  recv_window_ += static_cast<int64_t>(uncredited_);
  uncredited_ = 0;
}

void Session::credit(Stream* stream, size_t bytes) {
  credit_connection(bytes);
  if (stream == nullptr || stream->remote_ended_ || stream->reset_) return;
  stream->uncredited_ += bytes;
  const size_t window = std::max<size_t>(limits_.stream_window, kDefaultInitialWindowSize);
  if (stream->uncredited_ < window / 2) return;
  write_window_update(pending_, stream->id_, static_cast<uint32_t>(stream->uncredited_));
  stream->recv_window_ += static_cast<int64_t>(stream->uncredited_);
  stream->uncredited_ = 0;
}

bool Session::can_send(const Stream& stream) const {
  if (stream.reset_ || !stream.has_body_ || stream.response_sent_) return false;
  return (stream.queued_ > 0 && stream.send_window_ > 0) || (stream.ended_ && stream.queued_ == 0);
}

void Session::pop_ready() {
  ++ready_front_;
  if (ready_front_ == ready_.size()) {
    ready_.clear();
    ready_front_ = 0;
  } else if (ready_front_ >= 64 && 2 * ready_front_ >= ready_.size()) {
    // Streams that stay ready go round and round: the taken ones go.
    ready_.erase(ready_.begin(), ready_.begin() + static_cast<std::ptrdiff_t>(ready_front_));
    ready_front_ = 0;
  }
}

void Session::make_ready(Stream& stream) {
  if (stream.in_ready_ || !can_send(stream)) return;
  stream.in_ready_ = true;
  ready_.push_back(stream.id_);
}

void Session::close_finished() {
  if (closing_.empty()) return;
  std::vector<uint32_t> ids = std::move(closing_);
  closing_.clear();
  for (const uint32_t id : ids) {
    Stream* stream = find(id);
    if (stream == nullptr) continue;
    if (stream->reset_) {
      close_stream(stream, true);
    } else {
      close_if_done(*stream);
    }
  }
}

void Session::send(net::Buffer& out, size_t budget) {
  if (fatal_code_ >= 0) {
    if (fatal_sent_) return;
    // The GOAWAY (RFC 9113 6.8), and nothing else: answers to what came
    // before the error are not owed. (Our SETTINGS first if they have not
    // gone: the client reads nothing before them.)
    pending_.retrieve_all();
    if (!greeted_) greet();
    move_pending(out);
    write_goaway(out, highest_stream_, static_cast<ErrorCode>(fatal_code_));
    fatal_sent_ = true;
    return;
  }
  close_finished();
  greeted_ = true;
  move_pending(out);
  const size_t limit = budget >= SIZE_MAX - out.readable_bytes() ? SIZE_MAX : out.readable_bytes() + budget;
  // Room for the step's DATA at once: a buffer grown a frame at a time is
  // copied each time it doubles (for a large file, about as many bytes
  // again as are sent).
  out.ensure_writable(sendable(std::min(limit - out.readable_bytes(), kMaxReserve)));
  while (out.readable_bytes() < limit && send_data(out, limit - out.readable_bytes())) {
  }
  // What closing the streams whose last frame went out wrote (RST_STREAM
  // after a response the request's rest is not wanted for).
  close_finished();
  move_pending(out);
  // A connection with no stream keeps no more room for frames than a few
  // answers take (freed and made again, it would cost an allocation a
  // request for a client that sends one at a time).
  if (streams_.empty() && pending_.capacity() > kKeptPendingRoom) pending_.shrink(0);
  call_drained();
}

void Session::move_pending(net::Buffer& out) {
  if (pending_.readable_bytes() == 0) return;
  out.append(pending_.peek(), pending_.readable_bytes());
  pending_.retrieve_all();
}

size_t Session::sendable(size_t cap) const {
  const int64_t window = send_window_;
  size_t total = 0;
  for (size_t i = ready_front_; i < ready_.size() && total < cap; ++i) {
    const Stream* stream = find(ready_[i]);
    if (stream == nullptr || !can_send(*stream)) continue;
    const auto n = static_cast<size_t>(std::max<int64_t>(
        0, std::min<int64_t>({static_cast<int64_t>(stream->queued_), stream->send_window_, window})));
    total += n + kFrameHeaderSize * (n / peer_max_frame_ + 1);
  }
  return std::min(total, cap);
}

bool Session::send_data(net::Buffer& out, size_t left) {
  while (ready_front_ < ready_.size()) {
    Stream* stream = find(ready_[ready_front_]);
    if (stream == nullptr || !can_send(*stream)) {
      if (stream != nullptr) stream->in_ready_ = false;
      pop_ready();
      continue;
    }
    // The frame, header included, fits what is left of the budget: a
    // budget of 16 KiB is one TLS record then, not one and 9 bytes.
    const size_t room = left > kFrameHeaderSize ? left - kFrameHeaderSize : 0;
    size_t n = std::min({stream->queued_, size_t{peer_max_frame_}, std::max(room, kSmallestDataFrame)});
    n = static_cast<size_t>(std::min<int64_t>({static_cast<int64_t>(n), stream->send_window_, send_window_}));
    if (n == 0 && stream->queued_ > 0) return false;  // the connection's window is shut
    const FrameRun run = frames_at_once(*stream, n, left);
    pop_ready();
    stream->in_ready_ = false;
    const uint32_t id = stream->id_;
    const size_t bytes = run.bytes();
    const bool end = stream->ended_ && bytes == stream->queued_;
    out.ensure_writable(run.count * kFrameHeaderSize + bytes);
    char* frame = out.begin_write();
    // The body first: if a file cannot be read, nothing of the frames is
    // written and the stream is reset instead.
    const bool read = run.count > 1 ? stream->read_frames(frame, run.count, run.length, run.last)
                                    : stream->fill(frame + kFrameHeaderSize, n) == static_cast<long>(n);
    if (!read) {
      reset_stream(id, ErrorCode::kInternalError);
      return true;
    }
    for (size_t i = 0; i < run.count; ++i) {
      const bool last = i + 1 == run.count;
      store_frame_header(frame + i * (kFrameHeaderSize + run.length),
                         static_cast<uint32_t>(last ? run.last : run.length), FrameType::kData,
                         last && end ? kFlagEndStream : 0, id);
    }
    out.has_written(run.count * kFrameHeaderSize + bytes);
    stream->send_window_ -= static_cast<int64_t>(bytes);
    send_window_ -= static_cast<int64_t>(bytes);
    data_sent_ += bytes;
    if (end) {
      stream->response_sent_ = true;
      if (stream->reset_after_response_ && !stream->remote_ended_) {
        reset_stream(id, ErrorCode::kNoError);
      } else {
        close_if_done(*stream);
      }
    } else {
      make_ready(*stream);
    }
    return true;
  }
  return false;
}

Session::FrameRun Session::frames_at_once(const Stream& stream, size_t n, size_t left) const {
  FrameRun run{1, n, n};
  // Only while no other stream waits its turn (they take turns a frame at a
  // time), and from whole frames on.
  if (n != peer_max_frame_ || ready_.size() - ready_front_ != 1) return run;
  const size_t ahead = stream.file_ahead();
  const auto window = static_cast<size_t>(std::max<int64_t>(0, std::min(stream.send_window_, send_window_)));
  size_t total = n;
  size_t used = kFrameHeaderSize + n;
  while (run.count < Stream::kMaxFramesRead && ahead > total && window > total &&
         left > used + kFrameHeaderSize) {
    const size_t m = std::min({n, left - used - kFrameHeaderSize, ahead - total, window - total});
    // A small rest is left to the next call, which may make it a little
    // larger than its budget rather than a frame of a few bytes.
    if (m < n && m < kSmallestDataFrame) break;
    ++run.count;
    run.last = m;
    total += m;
    used += kFrameHeaderSize + m;
    if (m < n) break;
  }
  return run;
}

void Session::call_drained() {
  // Producers waiting for their streams to drain (collected first: a
  // callback may write, or reset a stream).
  std::vector<uint32_t> drained;
  for (auto& stream : streams_) {
    if (stream->waiting_drain_ && stream->queued_ < limits_.stream_high_water) drained.push_back(stream->id_);
  }
  for (const uint32_t id : drained) {
    Stream* stream = find(id);
    if (stream == nullptr) continue;
    stream->waiting_drain_ = false;
    if (callbacks_.on_drained) callbacks_.on_drained(*stream);
  }
}

bool Session::wants_to_send() const {
  if (fatal_code_ >= 0) return !fatal_sent_;
  if (pending_.readable_bytes() > 0 || !closing_.empty()) return true;
  for (size_t i = ready_front_; i < ready_.size(); ++i) {
    const uint32_t id = ready_[i];
    const Stream* stream = find(id);
    if (stream == nullptr || !can_send(*stream)) continue;
    if (send_window_ > 0 || stream->queued_ == 0) return true;
  }
  return false;
}

bool Session::check_pending() {
  if (pending_.readable_bytes() <= kMaxPendingFrames) return true;
  return fail(ErrorCode::kEnhanceYourCalm, "the client does not read the frames it asks for");
}

}  // namespace tern::http2
