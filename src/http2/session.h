// http2::Session: the server's side of one HTTP/2 connection, as bytes in
// and bytes out, on tern's own frames (frame_reader.h, frame_writer.h) and
// HPACK (hpack_decoder.h, hpack_encoder.h). It keeps the connection's state
// (RFC 9113): the preface and SETTINGS, stream states (section 5.1), both
// directions' flow-control windows (section 5.2), PING, GOAWAY,
// RST_STREAM, header blocks across CONTINUATION frames, and the checks a
// request's fields must pass (section 8.2: names in lower case, no
// connection-specific fields, pseudo-fields first and once). Its streams
// become what tern's handlers know:
//
//   - a request head fills an http::Request straight from HPACK (the
//     fields copied once, into the stream's arena; cookies joined into one
//     field), judged by the same checks and limits as HTTP/1's, so a
//     handler sees the same request whichever protocol carried it; a body
//     without a content-length is framed as chunked (its length is not
//     known);
//   - a response comes through http::ResponseStream, as from any handler:
//     the head's status and fields become a HEADERS frame (names lowered,
//     HTTP/1's framing and connection fields left out, the length kept),
//     body bytes and file regions become DATA frames as the client's
//     windows allow. What a stream has queued is its producer's to bound:
//     pending_output_bytes() says how much, and the on_drained callback
//     runs when it fell below stream_high_water.
//
// Request bodies are flow-controlled by what the handler takes: a stream
// whose body is paused stops being credited, so a client can send at most
// its window (stream_window) ahead of a handler that does not read.
//
// Priorities: PRIORITY frames and the HEADERS priority fields are checked
// (a stream may not depend on itself) and otherwise ignored, as RFC 9113
// section 5.3.2 allows; streams with body to send take turns, a frame
// each, in the order they became ready.
//
//   http2::Session session(limits, callbacks);
//   session.receive(bytes);      // from the socket; false: close after send()
//   session.send(output);        // frames to write
//
// Bytes leave only through send(); call it after receive() and after a
// handler wrote. One session per connection; loop thread only.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/request.h"
#include "http/response_stream.h"
#include "http1/request_parser.h"
#include "http2/frame.h"
#include "http2/frame_reader.h"
#include "http2/frame_writer.h"
#include "http2/hpack_decoder.h"
#include "http2/hpack_encoder.h"
#include "http2/stream.h"
#include "net/buffer.h"
#include "net/file_region.h"

namespace tern::http2 {

struct SessionLimits {
  uint32_t max_concurrent_streams = 128;
  // Request body bytes a client may send ahead of what the handlers took:
  // per stream, and for the whole connection.
  uint32_t stream_window = 256 * 1024;
  uint32_t connection_window = 1024 * 1024;
  // A request head is held to HTTP/1's limits (431 for too many fields,
  // 414 for a long target); a header block that decodes past
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

// Closed streams kept for the next ones (their strings and tables keep
// their room), requests let go of (Stream::release_request), and the room
// of heads that went out. The sessions of a loop share one
// (http2_protocol): the next stream of any connection takes the one closed
// last, still in the CPU's cache, where spares kept per connection were
// cold by the time a hundred other connections had had their turn (h2c,
// 100 connections x 10 streams, with the tasks kept the same way: 48.5
// first-level data cache misses a request down to 29.8,
// `bench/instructions --cache`). Loop thread only.
struct StreamSpares {
  static constexpr size_t kStreams = 64;  // and as many requests
  static constexpr size_t kHeads = 16;    // heads go out one at a time
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<std::unique_ptr<StreamRequest>> requests;
  std::vector<Head> heads;
};

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

  // `spares`: the loop's (a session of its own when none is given).
  Session(const SessionLimits& limits, Callbacks callbacks, std::shared_ptr<StreamSpares> spares = nullptr);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Bytes from the client. False when the connection cannot go on (a
  // protocol error: the GOAWAY that says so comes out of send()).
  bool receive(std::string_view bytes);
  // Appends the frames that are ready to `out`, or as many as make
  // `budget` bytes, frame headers included (DATA frames are cut to fit; a
  // frame more at most: call again while wants_to_send()).
  void send(net::Buffer& out, size_t budget = SIZE_MAX);
  // Frames are ready for send() (producers may have queued more from
  // inside it, in their drain callbacks).
  bool wants_to_send() const;
  // Neither side has more to say: close once the output has gone.
  bool done() const;
  // A graceful end: GOAWAY with the last stream taken; the streams in
  // progress finish.
  void shutdown();
  // The reason of the last failure, for the log.
  std::string_view error() const { return error_; }
  size_t open_streams() const { return streams_.size(); }
  // Response body bytes framed, and request body bytes received, so far
  // (the connection's timeouts measure progress by them).
  uint64_t data_sent() const { return data_sent_; }
  uint64_t data_received() const { return data_received_; }
  // Response bytes queued by all streams and not yet framed.
  size_t queued_bytes() const;
  // Lets go of the room kept for the next frames (an idle connection).
  void release_spares();

 private:
  friend class Stream;
  // A header block whose CONTINUATION frames are still to come.
  struct OpenBlock {
    uint32_t stream_id = 0;
    bool end_stream = false;
    FrameError stream_error;  // of its HEADERS frame (a bad priority)
    std::string bytes;        // its fragments so far
  };
  // What a stream id names when a frame arrives for it.
  enum class Known : uint8_t { kOpen, kIdle, kClosedByUs, kClosedByPeer, kForgotten };

  // ---- input (session.cc) ----
  // The bytes the preface, or the frame `begun` starts, takes in all.
  size_t wanted(std::string_view begun) const;
  // Reads the preface and whole frames at the front of `input`; returns
  // how many bytes it took.
  size_t read_input(std::string_view input);
  bool on_frame(const Frame& frame);
  bool on_data(const Frame& frame);
  bool on_headers(const Frame& frame);
  bool on_continuation(const Frame& frame);
  bool on_settings(const Frame& frame);
  bool on_rst_stream(const Frame& frame);
  bool on_window_update(const Frame& frame);
  // The client ended its side (END_STREAM on DATA or trailers): the body's
  // end goes to the handler, now or with the body held.
  void body_ended(Stream& stream);
  // A connection error: the GOAWAY that says so, and nothing more read.
  bool fail(ErrorCode code, std::string_view reason);
  // A control frame arrived: false once the client spent its budget.
  bool charge_control_frame();

  // ---- streams (session_streams.cc) ----
  Known known(uint32_t id, Stream** stream);
  Stream* find(uint32_t id) const;
  Stream* open_stream(uint32_t id);
  // Takes the stream out (on_close for one handed over): `by_us` when we
  // ended it, so the client's frames that crossed it are not errors.
  void close_stream(Stream* stream, bool by_us);
  void remember_closed(uint32_t id, bool by_us);
  // A stream error (RST_STREAM); the stream closes at the next send().
  void reset_stream(uint32_t id, ErrorCode code);
  // Both sides are done with it: it closes.
  void close_if_done(Stream& stream);

  // ---- heads (session_heads.cc) ----
  // A complete header block for `id`: decoded (always, for HPACK's state),
  // then a new request, trailers, or dropped. False on a connection error.
  bool on_block(uint32_t id, std::string_view block, bool end_stream, FrameError stream_error);
  bool decode_request(Stream& stream, std::string_view block, bool* valid);
  bool decode_trailers(std::string_view block, bool* valid);
  bool decode_and_drop(std::string_view block);
  bool hpack_failed(HpackError error);
  void start(Stream& stream);
  void start_waiting();
  // A response head is encoded as the ResponseWriter gives it, into the
  // stream's head buffer (begin_head, head_field, end_encoded_head), when
  // no other stream's head is being encoded and no table size update is
  // owed; otherwise its fields are kept and encoded when it ends
  // (submit_head), with the static table only while another head is open:
  // the dynamic table is the connection's, and a block that used it must
  // reach the client in the order it was encoded.
  void begin_head(Stream& stream, const http::HeadStart& start);
  void head_field(Stream& stream, const KnownField* known, std::string_view name, std::string_view value);
  void end_encoded_head(Stream& stream, const http::ResponseFraming& framing);
  // The head being encoded will not be sent (its stream was reset or
  // closed): both tables start over with the next block.
  void abandon_head();
  void submit_head(Stream& stream, const http::ResponseFraming& framing);
  // One field, into `out`.
  void encode_field(net::Buffer& out, const KnownField* known, std::string_view name, std::string_view value,
                    bool static_only);
  void encode_unknown_field(net::Buffer& out, std::string_view name, std::string_view value, bool static_only);
  // What follows a head, by its status and the writer's framing.
  struct HeadEnd {
    bool interim;     // a 1xx: the final head is still to come
    bool has_body;    // DATA frames follow
    bool end_stream;  // the HEADERS frame ends the stream
  };
  // The head's last field (its length, when the framing gives one), and
  // what follows the head.
  HeadEnd end_fields(const Stream& stream, net::Buffer& out, const http::ResponseFraming& framing);
  // What a head's end does beyond its block: the stream's state after it.
  void after_head(Stream& stream, HeadEnd end);
  // The block in `out` after `frame` (begin_frame), as a HEADERS frame, and
  // CONTINUATION frames past the client's frame size, onto pending_.
  void close_block(net::Buffer& out, FrameStart frame, uint32_t id, bool end_stream);
  // No head is being encoded any more: what waited for it goes on.
  void head_closed();
  void lend_back(Head& head);

  // ---- output (session_output.cc) ----
  // Our SETTINGS, and the connection's window opened to ours.
  void greet();
  // Body bytes the application took: the windows reopen, in steps of half.
  void credit(Stream* stream, size_t bytes);
  void credit_connection(size_t bytes);
  void make_ready(Stream& stream);
  void pop_ready();
  bool can_send(const Stream& stream) const;
  // DATA of the front ready stream into out: one frame, or several read
  // at once (frames_at_once); false when none could be made.
  bool send_data(net::Buffer& out, size_t left);
  // DATA frames made from one read: `count` of `length` bytes, the last
  // of `last`.
  struct FrameRun {
    size_t count;
    size_t length;
    size_t last;
    size_t bytes() const { return (count - 1) * length + last; }
  };
  // The frames the stream's next piece, a file, gives in one read, the
  // first of `n` bytes: several while the stream is the only one ready, as
  // far as `left`, the windows and the file allow; otherwise that one.
  FrameRun frames_at_once(const Stream& stream, size_t n, size_t left) const;
  // The bytes of DATA frames the ready streams could send now (headers
  // included, as far as the windows allow), up to `cap`.
  size_t sendable(size_t cap) const;
  // The most send() makes room for ahead (a call without a budget).
  static constexpr size_t kMaxReserve = 256 * 1024;
  void close_finished();
  // The frames made while reading, into `out`.
  void move_pending(net::Buffer& out);
  // False (and a connection error) once the frames made for a client that
  // does not read them pass their bound.
  bool check_pending();
  void call_drained();

  const SessionLimits limits_;
  Callbacks callbacks_;
  HpackDecoder decoder_;
  HpackEncoder encoder_;
  // The open streams, in no order, and their ids at the same positions: a
  // connection has a few to max_concurrent_streams, which a scan of the
  // ids finds as fast as a hash would, without a node per stream.
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<uint32_t> stream_ids_;
  std::string error_;

  // Input: the bytes of a frame not yet whole, and where the connection is.
  std::string partial_;
  bool preface_done_ = false;
  bool settings_seen_ = false;    // the client's first SETTINGS came
  bool settings_acked_ = false;   // the client took ours
  ContinuationCheck continuation_;
  OpenBlock block_;
  uint32_t highest_stream_ = 0;   // the highest stream id the client opened
  int no_rfc7540_priorities_ = -1;  // as the client set it, -1 before
  // The last streams closed, and by whom (kept to tell a frame that
  // crossed our RST_STREAM from a client's mistake): the id, and
  // kClosedByUsBit when we ended it.
  static constexpr uint32_t kClosedByUsBit = 0x80000000;
  std::array<uint32_t, 32> recently_closed_{};
  size_t closed_count_ = 0;
  // The streams whose heads came in the read under way: handed over once
  // it is through (a stream reset in the same read costs its decoding and
  // no more).
  static constexpr size_t kKeptStarts = 64;
  std::vector<uint32_t> starts_;
  // Scratch for a response's lowered names and encoded block, kept from
  // one head to the next.
  std::string names_;
  net::Buffer block_out_{0};
  // The stream whose head is being encoded (see begin_head), and what
  // waits for it: SETTINGS acknowledgements and the table sizes they set.
  Stream* open_head_ = nullptr;
  uint32_t acks_owed_ = 0;
  std::vector<uint32_t> owed_table_sizes_;

  // Output: frames other than DATA (answers, HEADERS, RST_STREAM, GOAWAY)
  // in the order they were made, ahead of DATA; the streams with DATA to
  // send, in turn; those reset or answered, to close at the next send().
  net::Buffer pending_{0};
  std::vector<uint32_t> ready_;  // from ready_front_ on
  size_t ready_front_ = 0;
  std::vector<uint32_t> closing_;
  bool greeted_ = false;  // our SETTINGS went out
  // The client's windows for our DATA (the connection's, and its setting
  // for new streams), and the frame size it takes.
  int64_t send_window_ = kDefaultInitialWindowSize;
  int64_t peer_initial_window_ = kDefaultInitialWindowSize;
  uint32_t peer_max_frame_ = kDefaultMaxFrameSize;
  // Our window for the client's DATA, and what was taken and not yet
  // credited back.
  int64_t recv_window_ = kDefaultInitialWindowSize;
  size_t uncredited_ = 0;
  // GOAWAY: ours queued (graceful, the last stream it took), the client's
  // received; after a fatal error its code and whether it went out.
  bool goaway_sent_ = false;
  uint32_t goaway_last_ = kStreamIdMask;
  bool goaway_received_ = false;
  int64_t fatal_code_ = -1;
  bool fatal_sent_ = false;
  uint64_t data_sent_ = 0;
  uint64_t data_received_ = 0;
  // The control frame budget (a token bucket) and when it was last filled.
  double control_tokens_;
  std::chrono::steady_clock::time_point control_filled_;
  std::shared_ptr<StreamSpares> spares_;  // the loop's
};

}  // namespace tern::http2
