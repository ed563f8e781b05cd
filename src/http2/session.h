// http2::Session: the server's side of one HTTP/2 connection, as bytes in
// and bytes out. nghttp2 does the framing, HPACK, flow control and the
// protocol's checks (RFC 9113 8.2: field names in lower case, no
// connection-specific fields, pseudo-fields in place); the session turns
// its streams into what tern's handlers know:
//
//   - a request head is read back into HTTP/1.1 text ("GET /a HTTP/1.1",
//     Host from :authority, cookies joined into one field) and parsed by
//     the same RequestParser and limits as HTTP/1, so a handler sees the
//     same http::Request whichever protocol carried it; a body without a
//     content-length is announced as chunked (its length is not known);
//   - a response comes through http::ResponseStream, as from any handler:
//     the head's HTTP/1 text becomes a HEADERS frame (names lowered, the
//     HTTP/1 framing and connection fields left out, Content-Length kept),
//     body bytes and file regions become DATA frames as the client's
//     windows allow. What a stream has queued is its producer's to bound:
//     pending_output_bytes() says how much, and the on_drained callback
//     runs when it fell below stream_high_water.
//
// Request bodies are flow-controlled by what the handler takes: a stream
// whose body is paused stops being credited, so a client can send at most
// its window (stream_window) ahead of a handler that does not read.
//
//   http2::Session session(limits, callbacks);
//   session.receive(bytes);      // from the socket; false: close after send()
//   session.send(output);        // frames to write
//
// Bytes leave only through send(); call it after receive() and after a
// handler wrote. One session per connection; loop thread only.
#pragma once

#include <nghttp2/nghttp2.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "http/request.h"
#include "http/request_parser.h"
#include "http/response_stream.h"
#include "net/buffer.h"
#include "net/file_region.h"

namespace tern::http2 {

struct SessionLimits {
  uint32_t max_concurrent_streams = 128;
  // Request body bytes a client may send ahead of what the handlers took:
  // per stream, and for the whole connection.
  uint32_t stream_window = 256 * 1024;
  uint32_t connection_window = 1024 * 1024;
  // The request head as HTTP/1 text is held to these (431 for too many
  // fields, 414 for a long target); a header block that decodes past
  // max_head_bytes ends the connection (ENHANCE_YOUR_CALM) where it is.
  http::RequestParser::Limits parser;
  // Queued response bytes of a stream above which its producer should wait
  // for on_drained.
  size_t stream_high_water = 64 * 1024;
  // Frames that ask work of the server and carry no request (SETTINGS,
  // PING, PRIORITY, PRIORITY_UPDATE, RST_STREAM, empty DATA): a client may
  // send `control_burst` at once and `control_rate` a second after that;
  // past it the connection ends with ENHANCE_YOUR_CALM (the floods of
  // CVE-2019-9512/9515/9518, and CVE-2023-44487's rapid reset).
  uint32_t control_burst = 1000;
  uint32_t control_rate = 100;
};

class Stream;

class Session {
 public:
  struct Callbacks {
    // A request head arrived, parsed; answer through the stream.
    std::function<void(Stream&)> on_request;
    // A piece of its body; `last` once the client ended the stream.
    std::function<void(Stream&, std::string_view piece, bool last)> on_body;
    // What the stream had queued fell below stream_high_water.
    std::function<void(Stream&)> on_drained;
    // The stream is gone (answered, reset by either side, or the
    // connection ended): no call on it after this one.
    std::function<void(Stream&)> on_close;
  };

  Session(const SessionLimits& limits, Callbacks callbacks);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Bytes from the client. False when the connection cannot go on (a
  // protocol error: the GOAWAY that says so comes out of send()).
  bool receive(std::string_view bytes);
  // Appends the frames that are ready to `out`, or as many as make
  // `budget` bytes (a frame more at most: call again while wants_to_send()).
  void send(net::Buffer& out, size_t budget = SIZE_MAX);
  // Frames are ready for send() (producers may have queued more from
  // inside it, in their drain callbacks).
  bool wants_to_send() const;
  // Neither side has more to say: close once the output has gone.
  bool done() const;
  // A graceful end: GOAWAY with the last stream taken; the streams in
  // progress finish.
  void shutdown();
  // Whether nghttp2's session is made yet. A connection that has sent
  // only its preface (SETTINGS, PINGs, WINDOW_UPDATEs on the connection)
  // is answered by hand and holds none: it is made when the first frame
  // that needs it comes (a request, or anything doubtful).
  bool awake() const { return session_ != nullptr; }
  // The reason of the last failure, for the log.
  std::string_view error() const { return error_; }
  size_t open_streams() const { return streams_.size(); }
  // Response body bytes framed, and request body bytes received, so far
  // (the connection's timeouts measure progress by them).
  uint64_t data_sent() const { return data_sent_; }
  uint64_t data_received() const { return data_received_; }
  // Response bytes queued by all streams and not yet framed.
  size_t queued_bytes() const;
  // Lets go of the room kept for the next streams (an idle connection).
  void release_spares();

 private:
  friend class Stream;
  struct Glue;  // nghttp2's callbacks
  Stream* open_stream(int32_t id);
  void close_stream(std::unique_ptr<Stream> stream);

  Stream* find(int32_t id);
  // Bytes for nghttp2 (awake).
  bool feed(std::string_view bytes);
  void make_nghttp2_session();
  // Asleep (session_heads.cc): what came is answered by hand if it can be
  // (false when something needs nghttp2); what is to go out; and waking,
  // which returns the bytes received that nghttp2 has yet to read.
  bool answer_asleep();
  bool answerable(uint8_t type, uint8_t flags, uint32_t stream_id, std::string_view payload,
                  uint64_t* window) const;
  void send_asleep(net::Buffer& out);
  std::string wake();
  static std::string goaway_frame(int32_t last_stream, uint32_t code);
  // How many of `bytes` (the input as it comes) nghttp2 may have: all, or
  // those before a frame that makes a header block too large.
  size_t scan(std::string_view bytes);
  // A control frame arrived: false once the client spent its budget.
  bool charge_control_frame();
  void start(Stream& stream);
  void start_waiting();
  // What nghttp2_session_mem_recv's result means (`cut`: scan() held bytes
  // back); false when the connection cannot go on.
  bool after_read(ssize_t taken, bool cut);
  void submit_head(Stream& stream, const http::ResponseFraming& framing);
  // What nghttp2 reads a stream's body through (Glue's read_body).
  static nghttp2_data_provider body_provider(Stream& stream);
  void resume(Stream& stream);

  const SessionLimits limits_;
  Callbacks callbacks_;
  nghttp2_session* session_ = nullptr;
  std::unordered_map<int32_t, std::unique_ptr<Stream>> streams_;
  // Closed streams kept for the next ones (their strings keep their room),
  // a few: a client that had many streams open does not leave them all
  // behind.
  static constexpr size_t kSpareStreams = 4;
  std::vector<std::unique_ptr<Stream>> spare_streams_;
  // submit_head's room (the lowered names, the field list), kept from one
  // head to the next.
  struct HeadScratch {
    std::string names;
    std::vector<nghttp2_nv> fields;
  };
  HeadScratch head_scratch_;
  http::RequestParser parser_;
  std::string error_;
  // The highest stream id the client opened, and the last streams closed.
  int32_t highest_stream_ = 0;
  // What the header block being read decodes to so far (RFC 9113's measure).
  size_t block_bytes_ = 0;
  // The input's framing as scan() follows it: preface bytes still to come,
  // payload bytes of the current frame still to come, a frame header
  // begun, and the size on the wire of the last header block.
  struct Scan {
    size_t preface = 24;
    size_t payload = 0;
    uint8_t header[9] = {};
    size_t have = 0;
    size_t block = 0;
  };
  Scan scan_;
  // The streams whose heads came in the read under way.
  static constexpr size_t kKeptStarts = 64;
  std::vector<int32_t> starts_;
  // Before nghttp2's session is made: the bytes received (kAsleepBytes at
  // most, else it is made), how many of them were answered (to be read
  // again by nghttp2, for its state, once it is made), the answers not
  // sent yet, whether our SETTINGS went out, the client's connection
  // window, and whether our GOAWAY is queued.
  static constexpr size_t kAsleepBytes = 512;
  struct Asleep {
    std::string in;
    size_t answered = 0;
    std::string out;
    bool greeted = false;
    bool gone = false;
    uint64_t window = 65535;
  };
  Asleep asleep_;
  bool replaying_ = false;  // nghttp2 reads again what was answered by hand
  std::array<int32_t, 32> recently_closed_{};
  size_t closed_count_ = 0;
  // After a fatal error (receive() said false): the GOAWAY code, and
  // whether it went out.
  int64_t fatal_code_ = -1;
  bool fatal_sent_ = false;
  uint64_t data_sent_ = 0;
  uint64_t data_received_ = 0;
  // Inside send(): where frames go, and the size of it that ends the call.
  net::Buffer* out_ = nullptr;
  size_t out_limit_ = 0;
  // The control frame budget (a token bucket) and when it was last filled.
  double control_tokens_;
  std::chrono::steady_clock::time_point control_filled_;
};

// One request and its response.
class Stream final : public http::ResponseStream {
 public:
  int32_t id() const { return id_; }
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
  net::Buffer& head_buffer() override;
  bool end_head(const http::ResponseFraming& framing) override;
  void data(std::string_view bytes) override;
  void file(net::FileRegion region) override;
  void end() override;

  // Response bytes queued and not yet framed.
  size_t pending_output_bytes() const { return queued_; }
  // Ends the stream with RST_STREAM and `error_code` (an RFC 9113 code).
  void reset(uint32_t error_code);

 private:
  friend class Session;
  friend struct Session::Glue;
  bool handed_over() const { return started_ && !waiting_start_; }
  // Passes on the body held while paused (or while waiting to start).
  void deliver_held();
  // A piece of the body in order: `bytes` of bytes_, or a file region.
  struct Piece {
    size_t bytes = 0;
    net::FileRegion region;
    size_t taken = 0;  // of the region
  };

  // Room a response head is given at first (ResponseWriter's appends).
  static constexpr size_t kHeadRoom = 512;

  Stream(Session* session, int32_t id) : session_(session), id_(id) {}
  // As new for stream `id`, keeping what its buffers hold room for.
  void recycle(int32_t id);
  // Up to `length` body bytes into `out`; what was copied, or -1 if a file
  // could not be read.
  long fill(uint8_t* out, size_t length);
  void pop_piece();

  Session* session_;
  int32_t id_;
  // The request: its head as HTTP/1 text, what was parsed from it.
  // In an allocation of its own, which a stream answered and whole lets go.
  struct RequestSide {
    std::string head_text;
    std::string authority, method, path, scheme, cookies;
    bool has_length_field = false;
    http::Request request;
  };
  std::unique_ptr<RequestSide> req_ = std::make_unique<RequestSide>();
  bool started_ = false;  // its head is whole (handed to on_request, unless refused)
  bool waiting_start_ = false;  // and waits for the end of the read (start_waiting)
  bool end_held_ = false;       // the client's end came while it waited
  bool body_complete_ = false;
  bool paused_ = false;
  std::string held_;  // body bytes that arrived while paused
  size_t uncredited_ = 0;
  // The response: its head until submitted (no room held otherwise), its
  // body's pieces from pieces_[front_] on.
  net::Buffer head_{0};
  std::vector<Piece> pieces_;
  size_t front_ = 0;
  net::Buffer bytes_{0};  // the body bytes of pieces_, in their order
  size_t queued_ = 0;
  bool ended_ = false;     // end() came
  bool deferred_ = false;  // nghttp2 waits for more body
  bool waiting_drain_ = false;
  bool response_sent_ = false;
  bool reset_after_response_ = false;
};

}  // namespace tern::http2
