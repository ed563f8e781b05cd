// http2::Stream: one request of an HTTP/2 connection and its response,
// as the session (session.h) keeps it: the request decoded into a
// StreamRequest, and the response as an http::ResponseStream (its head
// kept for HPACK, its body queued as bytes and file regions and framed as
// the client's windows allow). Loop thread of its connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/request.h"
#include "http/response_stream.h"
#include "http2/frame.h"
#include "net/buffer.h"
#include "net/file_region.h"

namespace tern::http2 {

class Session;

// A stream's request: its fields as decoded, copied into one arena (what
// the HPACK decoder gives lives only until its next field), and the
// http::Request made from them. In an allocation of its own, which a
// stream answered and whole lets go (the session keeps a few for the next
// streams: their arena and tables keep their room).
struct StreamRequest {
  // A stretch of the arena.
  struct Slice {
    uint32_t at = 0, size = 0;
  };
  // A field while the block is decoded: a name from the static table is
  // its static text, any other is copied.
  struct Field {
    std::string_view static_name;
    Slice name, value;
    http::FieldId id = http::FieldId::kOther;
  };
  std::string arena;
  std::vector<Field> decoded;
  Slice method, scheme, authority, path;
  std::string cookies;  // every cookie field's value, joined with "; " (8.2.3)
  bool has_length_field = false;
  std::vector<http::Header> fields;  // `decoded` as views, once the arena stays put
  http::Request request;

  static constexpr size_t kKeptArena = 4096;
  void clear();
  Slice keep(std::string_view bytes);
  std::string_view view(Slice slice) const { return {arena.data() + slice.at, slice.size}; }
};

// The names ResponseWriter and the handlers write most, as they write
// them: their HTTP/2 form and static table entry known without lowering or
// looking them up. `dropped`: HTTP/1's own, which HTTP/2 leaves out (and
// content-length, which comes from the framing).
struct KnownField {
  std::string_view written;
  std::string_view lower;
  bool dropped = false;
  uint8_t static_name = 0;
};

// The known field written as `name`, or nullptr.
const KnownField* find_known_field(std::string_view name);

// A response head while it is built: the bytes of its fields' names and
// values back to back, and where each lies. A known field keeps its value
// only (name_size 0); a dropped one is not kept.
struct Head {
  struct Field {
    const KnownField* known;
    uint32_t at, name_size, value_size;  // the name at `at`, the value after it
  };
  net::Buffer bytes{0};
  std::vector<Field> fields;
};

// One request and its response.
class Stream final : public http::ResponseStream {
 public:
  int32_t id() const { return static_cast<int32_t>(id_); }
  // Until release_request().
  const http::Request& request() const { return req_->request; }
  http::Request& request() { return req_->request; }
  // The client ended its side (the whole body, if any, was delivered).
  bool body_complete() const { return body_complete_; }
  // Body pieces stop being credited (the client stops once its window is
  // spent) and are held here; resume hands them over and credits them.
  void pause_body();
  void resume_body();
  bool body_paused() const { return paused_; }
  // The response went out whole (its last frame was sent).
  bool response_sent() const { return response_sent_; }
  // Once the response is out, the rest of the request is not wanted: the
  // stream ends with RST_STREAM NO_ERROR (RFC 9113 8.1).
  void reset_after_response() { reset_after_response_ = true; }
  size_t held_bytes() const { return held_.size(); }
  // The request, answered and whole, is not needed any more: its memory
  // goes (a stream may wait long for its client to take the response).
  void release_request();

  // ResponseStream.
  void start_head(int status, std::string_view reason, const http::HeadStart& start) override;
  void field(std::string_view name, std::string_view value) override;
  void fields(const http::FieldBlock& block) override;
  bool end_head(const http::ResponseFraming& framing) override;
  void data(std::string_view bytes) override;
  void kept_data(std::string_view bytes, const http::BodyOwner& owner) override;
  void file(net::FileRegion region) override;
  void end() override;

  // Response bytes queued and not yet framed.
  size_t pending_output_bytes() const { return queued_; }
  // Ends the stream with RST_STREAM and `code`.
  void reset(ErrorCode code);

 private:
  // Appends one field to the head: its name kept unless it is known.
  void keep_field(const KnownField* known, std::string_view name, std::string_view value);
  friend class Session;
  bool handed_over() const { return started_ && !waiting_start_; }
  // Passes on the body held while paused (or while waiting to start).
  void deliver_held();
  // A piece of the body in order: `bytes` of bytes_, or a file region.
  struct Piece {
    size_t bytes = 0;
    net::FileRegion region;
    size_t taken = 0;  // of the region
  };

  // Room a response head is given at first.
  static constexpr size_t kHeadRoom = 512;
  // Frames one read of a file fills at most (a step of 64 KiB is four).
  static constexpr size_t kMaxFramesRead = 8;

  Stream(Session* session, uint32_t id) : session_(session), id_(id) {}
  // As new for stream `id`, keeping what its buffers hold room for.
  void recycle(Session* session, uint32_t id);
  // Up to `length` body bytes into `out`; what was copied, or -1 if a file
  // could not be read.
  long fill(char* out, size_t length);
  // Bytes of the file the next piece is, from where it stands (0 when that
  // piece is not a file read from its descriptor).
  size_t file_ahead() const;
  // `count` frames' worth of that file, `length` bytes each but the last
  // (`last` bytes), read with one preadv into the payloads of frames laid
  // out from `frames` (each after its header's room); false if the file
  // could not be read whole.
  bool read_frames(char* frames, size_t count, size_t length, size_t last);
  void pop_piece();

  Session* session_;
  uint32_t id_;
  // The request, until release_request() hands it back to the session.
  std::unique_ptr<StreamRequest> req_ = std::make_unique<StreamRequest>();
  bool started_ = false;  // its head is whole (handed to on_request, unless refused)
  bool waiting_start_ = false;  // and waits for the end of the read (start_waiting)
  bool end_held_ = false;       // the client's end came while it waited
  bool body_complete_ = false;
  bool paused_ = false;
  bool remote_ended_ = false;   // the client sent END_STREAM
  bool reset_ = false;          // we reset it: it closes at the next send()
  bool in_ready_ = false;       // in Session::ready_
  std::string held_;  // body bytes that arrived while paused
  // Flow control: the client's window for our DATA, ours for its DATA,
  // and body bytes taken and not yet credited back.
  int64_t send_window_ = 0;
  int64_t recv_window_ = 0;
  size_t uncredited_ = 0;
  // content-length as the client sent it (-1: none), and the DATA so far.
  int64_t expected_length_ = -1;
  uint64_t data_in_ = 0;
  // The response: its head until submitted (its status, its fields' bytes
  // back to back and where each lies, in room the session lends from one
  // head to the next), its body's pieces from pieces_[front_] on.
  int status_ = 0;
  Head head_;
  std::vector<Piece> pieces_;
  size_t front_ = 0;
  net::Buffer bytes_{0};  // the body bytes of pieces_, in their order
  size_t queued_ = 0;
  bool has_body_ = false;  // the final head went without END_STREAM
  bool ended_ = false;     // end() came
  bool waiting_drain_ = false;
  bool response_sent_ = false;
  bool reset_after_response_ = false;
  bool encoding_ = false;  // its head is being encoded as it is given (Session::begin_head)
};

}  // namespace tern::http2
