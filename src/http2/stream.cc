// http2::Stream: one request's response side (its body queued as bytes and
// file regions, framed as the client's windows allow) and its request
// body's pacing. The session (session*.cc) drives it.
#include "http2/stream.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "base/assert.h"
#include "http2/hpack_primitives.h"
#include "http2/session.h"

namespace tern::http2 {
namespace {

// Known fields in a table by the length of their written name.
class KnownFields {
 public:
  KnownFields() {
    constexpr KnownField kFields[] = {
        {"Server", "server"}, {"Date", "date"}, {"Content-Type", "content-type"},
        {"Content-Length", "content-length", true}, {"Last-Modified", "last-modified"}, {"ETag", "etag"},
        {"Accept-Ranges", "accept-ranges"}, {"Vary", "vary"}, {"Content-Encoding", "content-encoding"},
        {"Cache-Control", "cache-control"}, {"Location", "location"}, {"Set-Cookie", "set-cookie"},
        {"Expires", "expires"}, {"Content-Range", "content-range"}, {"Link", "link"}, {"Allow", "allow"},
        {"Age", "age"}, {"Retry-After", "retry-after"}, {"WWW-Authenticate", "www-authenticate"},
        {"Strict-Transport-Security", "strict-transport-security"}, {"Connection", "connection", true},
        {"Keep-Alive", "keep-alive", true}, {"Transfer-Encoding", "transfer-encoding", true},
        {"Upgrade", "upgrade", true}, {"Proxy-Connection", "proxy-connection", true},
    };
    for (KnownField field : kFields) {
      field.static_name = hpack_static_name(field.lower);
      by_length_[field.written.size()].push_back(field);
    }
    server_ = find("Server");
    date_ = find("Date");
  }
  const KnownField* find(std::string_view name) const {
    if (name.size() >= by_length_.size()) return nullptr;
    for (const KnownField& field : by_length_[name.size()]) {
      if (same_bytes(field.written, name)) return &field;
    }
    return nullptr;
  }
  const KnownField* server() const { return server_; }
  const KnownField* date() const { return date_; }

 private:
  std::array<std::vector<KnownField>, 32> by_length_;
  const KnownField* server_;
  const KnownField* date_;
};

const KnownFields kKnownFields;

}  // namespace

const KnownField* find_known_field(std::string_view name) { return kKnownFields.find(name); }

void Stream::recycle(Session* session, uint32_t id) {
  session_ = session;
  id_ = id;
  if (req_ == nullptr && !session_->spares_->requests.empty()) {
    req_ = std::move(session_->spares_->requests.back());
    session_->spares_->requests.pop_back();
  }
  if (req_ == nullptr) {
    req_ = std::make_unique<StreamRequest>();
  } else {
    req_->clear();
  }
  started_ = waiting_start_ = end_held_ = body_complete_ = paused_ = false;
  remote_ended_ = reset_ = in_ready_ = false;
  held_.clear();
  send_window_ = recv_window_ = 0;
  uncredited_ = 0;
  expected_length_ = -1;
  data_in_ = 0;
  head_.bytes.retrieve_all();
  head_.fields.clear();
  pieces_.clear();
  front_ = 0;
  bytes_.retrieve_all();
  queued_ = 0;
  has_body_ = ended_ = waiting_drain_ = response_sent_ = reset_after_response_ = false;
  encoding_ = false;
}

void StreamRequest::clear() {
  if (arena.capacity() > kKeptArena) {
    std::string().swap(arena);
    std::vector<Field>().swap(decoded);
    std::vector<http::Header>().swap(fields);
  }
  arena.clear();
  decoded.clear();
  fields.clear();
  cookies.clear();
  method = scheme = authority = path = {};
  has_length_field = false;
  request.set_body({});
}

StreamRequest::Slice StreamRequest::keep(std::string_view bytes) {
  const Slice slice{static_cast<uint32_t>(arena.size()), static_cast<uint32_t>(bytes.size())};
  arena.append(bytes);
  return slice;
}

void Stream::release_request() {
  if (req_ == nullptr) return;
  if (session_->spares_->requests.size() < StreamSpares::kStreams) {
    session_->spares_->requests.push_back(std::move(req_));
  } else {
    req_.reset();
  }
}

void Stream::start_head(int status, std::string_view, const http::HeadStart& start) {
  status_ = status;  // HTTP/2 has no reason phrase (8.3.2)
  if (head_.bytes.capacity() == 0) {
    if (!session_->spares_->heads.empty()) {
      head_ = std::move(session_->spares_->heads.back());
      session_->spares_->heads.pop_back();
    } else {
      head_.bytes.ensure_writable(kHeadRoom);
    }
  }
  head_.bytes.retrieve_all();
  head_.fields.clear();
  encoding_ = !reset_ && session_->open_head_ == nullptr && !session_->encoder_.update_pending();
  if (encoding_) return session_->begin_head(*this, start);
  if (!start.server.empty()) keep_field(kKnownFields.server(), {}, start.server);
  if (!start.date.empty()) keep_field(kKnownFields.date(), {}, start.date);
}

void Stream::field(std::string_view name, std::string_view value) {
  const KnownField* known = kKnownFields.find(name);
  if (known != nullptr && known->dropped) return;
  if (encoding_) return session_->head_field(*this, known, name, value);
  keep_field(known, known == nullptr ? name : std::string_view(), value);
}

void Stream::keep_field(const KnownField* known, std::string_view name, std::string_view value) {
  net::Buffer& bytes = head_.bytes;
  const auto at = static_cast<uint32_t>(bytes.readable_bytes());
  bytes.ensure_writable(name.size() + value.size());
  char* p = bytes.begin_write();
  if (!name.empty()) std::memcpy(p, name.data(), name.size());
  if (!value.empty()) std::memcpy(p + name.size(), value.data(), value.size());
  bytes.has_written(name.size() + value.size());
  head_.fields.push_back({known, at, static_cast<uint32_t>(name.size()), static_cast<uint32_t>(value.size())});
}

void Stream::fields(const http::FieldBlock& block) {
  for (size_t i = 0; i < block.size(); ++i) field(block.name(i), block.value(i));
}

bool Stream::end_head(const http::ResponseFraming& framing) {
  if (encoding_) {
    encoding_ = false;
    session_->end_encoded_head(*this, framing);
  } else if (!reset_) {
    session_->submit_head(*this, framing);
  }
  session_->lend_back(head_);
  return true;  // HTTP/2 ends a body without ending the connection
}

void Stream::data(std::string_view bytes) {
  if (bytes.empty() || reset_) return;
  if (pieces_.size() == front_ || pieces_.back().region.length != 0) pieces_.emplace_back();
  pieces_.back().bytes += bytes.size();
  bytes_.append(bytes);
  queued_ += bytes.size();
  if (queued_ >= session_->limits_.stream_high_water) waiting_drain_ = true;
  session_->make_ready(*this);
}

// Queued as a region of memory: the bytes are copied once, into a frame.
void Stream::kept_data(std::string_view bytes, const http::BodyOwner& owner) {
  net::FileRegion region;
  region.memory = bytes.data();
  region.length = bytes.size();
  region.keep_alive = owner.share();
  file(std::move(region));
}

void Stream::file(net::FileRegion region) {
  if (region.length == 0 || reset_) return;
  queued_ += region.length;
  pieces_.push_back(Piece{0, std::move(region), 0});
  if (queued_ >= session_->limits_.stream_high_water) waiting_drain_ = true;
  session_->make_ready(*this);
}

void Stream::end() {
  ended_ = true;
  session_->make_ready(*this);
}

void Stream::reset(ErrorCode code) { session_->reset_stream(id_, code); }

void Stream::pause_body() { paused_ = true; }

void Stream::resume_body() {
  if (!paused_) return;
  paused_ = false;
  deliver_held();
}

void Stream::deliver_held() {
  std::string held = std::move(held_);
  held_.clear();
  if (end_held_) {
    end_held_ = false;
    body_complete_ = true;
  }
  if (!started_ || reset_) {
    // Refused from its head (a 4xx), or reset: what came of its body is dropped.
    session_->data_received_ += held.size();
    session_->credit_connection(held.size());
    return;
  }
  if (!held.empty()) {
    session_->data_received_ += held.size();
    session_->credit(this, held.size());
    session_->callbacks_.on_body(*this, held, false);
  }
  if (body_complete_ && !paused_ && !reset_) session_->callbacks_.on_body(*this, {}, true);
}

long Stream::fill(char* out, size_t length) {
  size_t done = 0;
  while (done < length && front_ < pieces_.size()) {
    Piece& piece = pieces_[front_];
    if (piece.region.length == 0) {
      const size_t n = std::min(length - done, piece.bytes);
      std::memcpy(out + done, bytes_.peek(), n);
      bytes_.retrieve(n);
      piece.bytes -= n;
      done += n;
      queued_ -= n;
      if (piece.bytes == 0) pop_piece();
      continue;
    }
    size_t n = std::min(length - done, piece.region.length - piece.taken);
    if (piece.region.memory != nullptr) {
      std::memcpy(out + done, piece.region.memory + piece.region.offset + piece.taken, n);
    } else {
      const ssize_t got = ::pread(piece.region.fd, out + done, n, piece.region.offset + static_cast<off_t>(piece.taken));
      if (got <= 0) return -1;  // the file was cut short, or cannot be read
      n = static_cast<size_t>(got);
    }
    piece.taken += n;
    done += n;
    queued_ -= n;
    if (piece.taken == piece.region.length) pop_piece();
  }
  return static_cast<long>(done);
}

size_t Stream::file_ahead() const {
  if (front_ == pieces_.size()) return 0;
  const Piece& piece = pieces_[front_];
  if (piece.region.length == 0 || piece.region.memory != nullptr) return 0;
  return piece.region.length - piece.taken;
}

bool Stream::read_frames(char* frames, size_t count, size_t length, size_t last) {
  std::array<iovec, kMaxFramesRead> slots{};
  const size_t total = (count - 1) * length + last;
  TERN_CHECK(count >= 1 && count <= slots.size() && last <= length && total <= file_ahead());
  for (size_t i = 0; i < count; ++i) {
    slots[i].iov_base = frames + i * (kFrameHeaderSize + length) + kFrameHeaderSize;
    slots[i].iov_len = i + 1 == count ? last : length;
  }
  Piece& piece = pieces_[front_];
  const ssize_t got = ::preadv(piece.region.fd, slots.data(), static_cast<int>(count),
                               piece.region.offset + static_cast<off_t>(piece.taken));
  if (got < 0 || static_cast<size_t>(got) != total) return false;  // cut short, or unreadable
  piece.taken += total;
  queued_ -= total;
  if (piece.taken == piece.region.length) pop_piece();
  return true;
}

void Stream::pop_piece() {
  pieces_[front_++] = Piece{};  // lets go of its file
  if (front_ == pieces_.size()) {
    pieces_.clear();
    front_ = 0;
  } else if (front_ >= 16 && 2 * front_ >= pieces_.size()) {
    // A producer that keeps a piece queued ahead: the sent ones go.
    pieces_.erase(pieces_.begin(), pieces_.begin() + static_cast<std::ptrdiff_t>(front_));
    front_ = 0;
  }
}

}  // namespace tern::http2
