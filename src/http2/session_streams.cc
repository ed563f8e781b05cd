// http2::Session's streams: which state a stream id is in when a frame
// names it (open, idle, closed by either side, or long gone), opening a
// stream (a spare one reused), closing it, and resetting it. See
// session.h.
#include "http2/session.h"

#include <algorithm>

#include "base/assert.h"
#include "http2/frame_writer.h"

namespace tern::http2 {

Session::Known Session::known(uint32_t id, Stream** stream) {
  *stream = find(id);
  if (*stream != nullptr) return Known::kOpen;
  if (id > highest_stream_) return Known::kIdle;
  for (const uint32_t closed : recently_closed_) {
    if ((closed & kStreamIdMask) == id) return (closed & kClosedByUsBit) != 0 ? Known::kClosedByUs : Known::kClosedByPeer;
  }
  return Known::kForgotten;
}

Stream* Session::find(uint32_t id) const {
  for (size_t i = 0; i < stream_ids_.size(); ++i) {
    if (stream_ids_[i] == id) return streams_[i].get();
  }
  return nullptr;
}

Stream* Session::open_stream(uint32_t id) {
  std::unique_ptr<Stream> stream;
  if (spares_->streams.empty()) {
    stream.reset(new Stream(this, id));
  } else {
    stream = std::move(spares_->streams.back());
    spares_->streams.pop_back();
    stream->recycle(this, id);
  }
  stream->send_window_ = peer_initial_window_;
  // Until the client acknowledges our settings it may count on the
  // default window.
  stream->recv_window_ = std::max<int64_t>(limits_.stream_window, kDefaultInitialWindowSize);
  Stream* raw = stream.get();
  streams_.push_back(std::move(stream));
  stream_ids_.push_back(id);
  return raw;
}

void Session::remember_closed(uint32_t id, bool by_us) {
  recently_closed_[closed_count_++ % recently_closed_.size()] = id | (by_us ? kClosedByUsBit : 0);
}

void Session::close_stream(Stream* stream, bool by_us) {
  const size_t at = static_cast<size_t>(std::find(stream_ids_.begin(), stream_ids_.end(), stream->id_) - stream_ids_.begin());
  TERN_DCHECK(at < streams_.size());
  std::unique_ptr<Stream> owned = std::move(streams_[at]);
  streams_[at] = std::move(streams_.back());
  streams_.pop_back();
  stream_ids_[at] = stream_ids_.back();
  stream_ids_.pop_back();
  remember_closed(owned->id_, by_us);
  if (owned->in_ready_) {
    ready_.erase(std::find(ready_.begin() + static_cast<std::ptrdiff_t>(ready_front_), ready_.end(), owned->id_));
    owned->in_ready_ = false;
  }
  // Body bytes it was not credited for go back to the connection.
  if (!owned->held_.empty()) credit_connection(owned->held_.size());
  if (owned->handed_over() && callbacks_.on_close) callbacks_.on_close(*owned);
  // Its head, if one was being encoded, will never be sent.
  if (owned->encoding_) {
    owned->encoding_ = false;
    abandon_head();
  }
  owned->pieces_.clear();  // lets go of its files
  if (spares_->streams.size() < StreamSpares::kStreams) spares_->streams.push_back(std::move(owned));
}

void Session::reset_stream(uint32_t id, ErrorCode code) {
  Stream* stream = find(id);
  if (stream != nullptr && stream->reset_) return;  // one RST_STREAM a stream
  write_rst_stream(pending_, id, code);
  if (stream == nullptr) return;
  stream->reset_ = true;
  closing_.push_back(id);
}

void Session::close_if_done(Stream& stream) {
  if (stream.remote_ended_ && stream.response_sent_ && !stream.reset_) close_stream(&stream, false);
}

}  // namespace tern::http2
