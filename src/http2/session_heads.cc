// http2::Session's header blocks, both ways: a request's block decoded
// with HPACK, its fields checked as RFC 9113 section 8.2 asks and copied
// into the stream's arena, then made its http::Request (start); trailers
// checked and dropped; and a response's head, as the ResponseWriter gave
// it field by field, encoded as a HEADERS frame (submit_head). See
// session.h.
#include "http2/session.h"

#include <array>
#include <charconv>
#include <chrono>
#include <vector>

#include "base/assert.h"
#include "http/chars.h"
#include "http2/frame_writer.h"
#include "http2/hpack_primitives.h"

namespace tern::http2 {
namespace {

// Static table entries (RFC 7541 Appendix A): the first with each name
// (:method, :path and :scheme have two each).
constexpr uint8_t kAuthorityName = 1;
constexpr uint8_t kMethodName = 2;
constexpr uint8_t kPathName = 4;
constexpr uint8_t kSchemeName = 6;
constexpr uint8_t kStatusName = 8;
constexpr uint8_t kDateName = 33;
constexpr uint8_t kServerName = 54;
constexpr uint8_t kLastPseudoName = 14;
constexpr uint8_t kContentLengthName = 28;
constexpr uint8_t kCookieName = 32;
constexpr uint8_t kTransferEncodingName = 57;

// HTTP/1 fields that describe a connection, which HTTP/2 forbids (RFC 9113
// 8.2.2); the names as lowered.
bool is_connection_field(std::string_view name) {
  return name == "connection" || name == "keep-alive" || name == "proxy-connection" ||
         name == "transfer-encoding" || name == "upgrade";
}

// A field name as HTTP/2 carries it: a token, in lower case (8.2.1).
bool valid_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!http::chars::is_tchar(c) || (c >= 'A' && c <= 'Z')) return false;
  }
  return true;
}

}  // namespace

bool Session::hpack_failed(HpackError error) {
  if (error == HpackError::kHeaderListTooLarge) {
    return fail(ErrorCode::kEnhanceYourCalm, "a header block decodes past the head limit");
  }
  return fail(ErrorCode::kCompressionError, std::string("HPACK: ") + to_string(error));
}

bool Session::decode_and_drop(std::string_view block) {
  const HpackError error = decoder_.decode(block, [](const HpackField&) {});
  return error == HpackError::kOk || hpack_failed(error);
}

bool Session::on_block(uint32_t id, std::string_view block, bool end_stream, FrameError stream_error) {
  Stream* stream = nullptr;
  switch (known(id, &stream)) {
    case Known::kOpen: {
      // Trailers: they end the stream (8.1), and are checked, not passed on.
      bool valid = true;
      if (!decode_trailers(block, &valid)) return false;
      if (stream->reset_) return true;
      if (stream->remote_ended_) {
        reset_stream(id, ErrorCode::kStreamClosed);
        return true;
      }
      if (!end_stream) return fail(ErrorCode::kProtocolError, "a second HEADERS without END_STREAM");
      if (!valid || !stream_error.ok() ||
          (stream->expected_length_ >= 0 && stream->data_in_ != static_cast<uint64_t>(stream->expected_length_))) {
        reset_stream(id, stream_error.ok() ? ErrorCode::kProtocolError : stream_error.code);
        return true;
      }
      body_ended(*stream);
      return true;
    }
    case Known::kClosedByUs:
      return decode_and_drop(block);  // crossed our RST_STREAM
    case Known::kClosedByPeer:
      return decode_and_drop(block) && fail(ErrorCode::kStreamClosed, "HEADERS on a closed stream");
    case Known::kForgotten:
      return decode_and_drop(block) && fail(ErrorCode::kProtocolError, "HEADERS on a stream id below one already used");
    case Known::kIdle:
      break;
  }
  // A new stream (section 5.1.1): odd, and above every one before it.
  if (id % 2 == 0) return fail(ErrorCode::kProtocolError, "a client opened an even stream id");
  highest_stream_ = id;
  if (goaway_sent_ && id > goaway_last_) return decode_and_drop(block);  // after our GOAWAY: not taken
  if (streams_.size() >= limits_.max_concurrent_streams) {
    if (!decode_and_drop(block)) return false;
    // Before the client took our limit it may not know it (5.1.2).
    if (settings_acked_) return fail(ErrorCode::kProtocolError, "more streams than SETTINGS_MAX_CONCURRENT_STREAMS");
    write_rst_stream(pending_, id, ErrorCode::kRefusedStream);
    remember_closed(id, true);
    return true;
  }
  stream = open_stream(id);
  stream->remote_ended_ = end_stream;
  bool valid = true;
  if (!decode_request(*stream, block, &valid)) return false;
  // A body announced and none sent (8.1.1).
  if (end_stream && stream->expected_length_ > 0) valid = false;
  if (!valid || !stream_error.ok()) {
    reset_stream(id, stream_error.ok() ? ErrorCode::kProtocolError : stream_error.code);
    return true;
  }
  // Handed over once the read is through (start_waiting).
  stream->started_ = stream->waiting_start_ = true;
  stream->body_complete_ = end_stream;
  starts_.push_back(id);
  return true;
}

// The static table's names as field ids, by index.
const std::array<http::FieldId, kHpackStaticCount + 1>& static_field_ids() {
  static const auto ids = [] {
    std::array<http::FieldId, kHpackStaticCount + 1> table{};
    for (uint32_t i = 1; i <= kHpackStaticCount; ++i) table[i] = http::field_id(hpack_static_entry(i).name);
    return table;
  }();
  return ids;
}

bool Session::decode_request(Stream& stream, std::string_view block, bool* valid) {
  StreamRequest& req = *stream.req_;
  const auto& static_ids = static_field_ids();
  bool regular_seen = false;
  bool has_method = false, has_scheme = false, has_path = false, has_authority = false;
  bool bad = false;
  const HpackError error = decoder_.decode(block, [&](const HpackField& f) {
    if (bad) return;
    const std::string_view name = f.name;
    std::string_view value = f.value;
    // No NUL, CR or LF in a value (8.2.1), nor any other control byte but
    // HTAB: what an HTTP/1 field line may hold, since a request may go on
    // to an HTTP/1 upstream.
    if (!f.field_text) {
      bad = true;
      return;
    }
    // A name from the static table (directly or through a dynamic entry
    // made with one) is known by its index: valid, lower case, and what it
    // is without comparing strings.
    const uint8_t known = f.static_index;
    if (known != 0 ? known <= kLastPseudoName : name.starts_with(':')) {
      // Pseudo-fields: the four of a request, each once, before the others.
      bool* seen = nullptr;
      StreamRequest::Slice* into = nullptr;
      if (known == kMethodName || known == kMethodName + 1 || (known == 0 && name == ":method")) {
        seen = &has_method, into = &req.method;
      } else if (known == kPathName || known == kPathName + 1 || (known == 0 && name == ":path")) {
        seen = &has_path, into = &req.path;
      } else if (known == kSchemeName || known == kSchemeName + 1 || (known == 0 && name == ":scheme")) {
        seen = &has_scheme, into = &req.scheme;
      } else if (known == kAuthorityName || (known == 0 && name == ":authority")) {
        seen = &has_authority, into = &req.authority;
      }
      if (seen == nullptr || *seen || regular_seen) {
        bad = true;
        return;
      }
      *seen = true;
      *into = req.keep(value);
      return;
    }
    regular_seen = true;
    if (known == kTransferEncodingName ||
        (known == 0 && (!valid_name(name) || is_connection_field(name) || (name == "te" && value != "trailers")))) {
      bad = true;  // (transfer-encoding is the static table's only connection-specific name; te is not in it)
      return;
    }
    // As HTTP/1 reads a field line: no leading or trailing whitespace.
    value = http::chars::trim_ows(value);
    if (known == kCookieName) {
      // Split into several fields to compress better (8.2.3); one for
      // the handlers, as HTTP/1 sends it.
      if (!req.cookies.empty()) req.cookies += "; ";
      req.cookies += value;
      return;
    }
    if (known == kContentLengthName) {
      req.has_length_field = true;
      uint64_t length = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
      if (ec == std::errc() && end == value.data() + value.size() && !value.empty()) {
        if (stream.expected_length_ >= 0 && static_cast<uint64_t>(stream.expected_length_) != length) {
          bad = true;
          return;
        }
        stream.expected_length_ = static_cast<int64_t>(length);
      }
    }
    StreamRequest::Field& field = req.decoded.emplace_back();
    if (known != 0) {
      field.static_name = hpack_static_entry(known).name;
      field.id = static_ids[known];
    } else {
      field.name = req.keep(name);
      field.id = http::field_id(name);
    }
    field.value = req.keep(value);
  });
  if (error != HpackError::kOk) return hpack_failed(error);
  if (!bad) {
    const std::string_view method = req.view(req.method);
    if (!has_method) {
      bad = true;
    } else if (method == "CONNECT") {
      bad = !has_authority || has_scheme || has_path;
    } else {
      const std::string_view path = req.view(req.path);
      bad = !has_scheme || !has_path || path.empty() || (path.front() != '/' && path != "*");
    }
  }
  *valid = !bad;
  return true;
}

bool Session::decode_trailers(std::string_view block, bool* valid) {
  bool bad = false;
  const HpackError error = decoder_.decode(block, [&](const HpackField& f) {
    if (f.name.starts_with(':') || !valid_name(f.name) || !f.field_text) bad = true;
  });
  if (error != HpackError::kOk) return hpack_failed(error);
  *valid = !bad;
  return true;
}

// The request head, complete: its fields, now that the arena stays put,
// fill the stream's http::Request.
void Session::start(Stream& stream) {
  StreamRequest& req = *stream.req_;
  req.fields.clear();
  for (const StreamRequest::Field& field : req.decoded) {
    const std::string_view name = field.static_name.empty() ? req.view(field.name) : field.static_name;
    req.fields.push_back({name, req.view(field.value), field.id});
  }
  if (!req.cookies.empty()) req.fields.push_back({"cookie", req.cookies, http::FieldId::kCookie});
  http::Request::DecodedHead head;
  head.method = req.view(req.method);
  head.scheme = req.view(req.scheme);
  head.authority = req.view(req.authority);
  head.path = req.view(req.path);
  head.fields = &req.fields;
  head.body_of_unknown_length = !stream.body_complete_ && !req.has_length_field;
  head.max_target = limits_.parser.max_target;
  head.max_headers = limits_.parser.max_headers;
  std::string_view reason;
  const int code = req.request.set_head(http::Version::kHttp2, head, &reason);
  if (code != 0) {
    // A head HTTP/1 would refuse: the same status, and no more.
    char digits[3] = {static_cast<char>('0' + code / 100), static_cast<char>('0' + code / 10 % 10),
                      static_cast<char>('0' + code % 10)};
    // With the static table only: it may be sent while a head is being
    // encoded (see begin_head).
    block_out_.retrieve_all();
    encoder_.encode_static_only(":status", std::string_view(digits, 3), kStatusName, block_out_);
    encoder_.encode_static_only("content-length", "0", kContentLengthName, block_out_);
    write_headers(pending_, stream.id_, block_out_.view(), true, peer_max_frame_);
    stream.started_ = false;  // the handlers never see it
    stream.response_sent_ = true;
    if (!stream.remote_ended_) stream.reset_after_response_ = true;
    if (stream.reset_after_response_) {
      reset_stream(stream.id_, ErrorCode::kNoError);
    } else {
      close_if_done(stream);
    }
    return;
  }
  req.request.set_received_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::steady_clock::now().time_since_epoch()).count());
  callbacks_.on_request(stream);
}

// The streams whose heads came in the last read, handed over now that it
// is through: a stream the client reset in the same read (a rapid reset)
// costs its decoding and no more. A connection that is ending starts none.
void Session::start_waiting() {
  if (fatal_code_ >= 0) starts_.clear();
  for (const uint32_t id : starts_) {
    Stream* stream = find(id);
    if (stream == nullptr || !stream->waiting_start_) continue;
    stream->waiting_start_ = false;
    if (stream->reset_) continue;
    start(*stream);
    stream = find(id);
    if (stream != nullptr && !stream->paused_ && !stream->reset_) stream->deliver_held();
  }
  starts_.clear();
  if (starts_.capacity() > kKeptStarts) std::vector<uint32_t>().swap(starts_);
}

// The room of a head that went out goes back to the session for the next
// one (heads are built one at a time: one or two suffice), unless a large
// head made it large; a stream that waits on its client holds none.
void Session::lend_back(Head& head) {
  if (head.bytes.capacity() <= 2 * Stream::kHeadRoom && spares_->heads.size() < StreamSpares::kHeads) {
    head.bytes.retrieve_all();
    head.fields.clear();
    spares_->heads.push_back(std::move(head));
  }
  head = Head{};
}

namespace {

// A block is written into `out` after a frame header's room (begin_frame),
// and closed by close_block.
void encode_status(HpackEncoder& encoder, net::Buffer& out, int code, bool static_only) {
  if (code == 200) {
    // The first :status entry is 200's (and both ways leave the table be).
    return static_only ? encoder.encode_static_only(":status", "200", kStatusName, out)
                       : encoder.encode_indexed(kStatusName, out);
  }
  const char status[3] = {static_cast<char>('0' + code / 100 % 10), static_cast<char>('0' + code / 10 % 10),
                          static_cast<char>('0' + code % 10)};
  if (static_only) return encoder.encode_static_only(":status", std::string_view(status, 3), kStatusName, out);
  encoder.encode(":status", std::string_view(status, 3), kStatusName, out);
}

}  // namespace

void Session::encode_field(net::Buffer& out, const KnownField* known, std::string_view name, std::string_view value,
                           bool static_only) {
  if (known == nullptr) return encode_unknown_field(out, name, value, static_only);
  if (static_only) return encoder_.encode_static_only(known->lower, value, known->static_name, out);
  encoder_.encode(known->lower, value, known->static_name, out);
}

void Session::encode_unknown_field(net::Buffer& out, std::string_view name, std::string_view value,
                                   bool static_only) {
  names_.resize(name.size());
  for (size_t i = 0; i < name.size(); ++i) {
    names_[i] = name[i] >= 'A' && name[i] <= 'Z' ? static_cast<char>(name[i] + 32) : name[i];
  }
  if (is_connection_field(names_) || names_ == "content-length") return;
  const uint8_t static_name = hpack_static_name(names_);
  if (static_only) return encoder_.encode_static_only(names_, value, static_name, out);
  encoder_.encode(names_, value, static_name, out);
}

void Session::begin_head(Stream& stream, const http::HeadStart& start) {
  open_head_ = &stream;
  net::Buffer& out = stream.head_.bytes;
  begin_frame(out);
  encode_status(encoder_, out, stream.status_, false);
  if (!start.server.empty()) encoder_.encode("server", start.server, kServerName, out);
  if (!start.date.empty()) encoder_.encode("date", start.date, kDateName, out);
}

void Session::head_field(Stream& stream, const KnownField* known, std::string_view name, std::string_view value) {
  encode_field(stream.head_.bytes, known, name, value, false);
}

void Session::end_encoded_head(Stream& stream, const http::ResponseFraming& framing) {
  if (stream.reset_) return abandon_head();
  net::Buffer& out = stream.head_.bytes;
  const HeadEnd end = end_fields(stream, out, framing);
  close_block(out, FrameStart{kFrameHeaderSize}, stream.id_, end.end_stream);
  head_closed();
  after_head(stream, end);
}

void Session::abandon_head() {
  encoder_.reset_table();
  head_closed();
}

void Session::head_closed() {
  open_head_ = nullptr;
  for (const uint32_t size : owed_table_sizes_) encoder_.set_peer_table_size(size);
  owed_table_sizes_.clear();
  for (; acks_owed_ > 0; --acks_owed_) write_settings_ack(pending_);
}

void Session::submit_head(Stream& stream, const http::ResponseFraming& framing) {
  // Encoded straight into a HEADERS frame, as most fit one.
  const bool static_only = open_head_ != nullptr;
  net::Buffer& out = pending_;
  const FrameStart frame = begin_frame(out);
  encode_status(encoder_, out, stream.status_, static_only);
  const char* const bytes = stream.head_.bytes.peek();
  for (const Head::Field& f : stream.head_.fields) {
    const std::string_view value(bytes + f.at + f.name_size, f.value_size);
    encode_field(out, f.known, std::string_view(bytes + f.at, f.name_size), value, static_only);
  }
  const HeadEnd end = end_fields(stream, out, framing);
  close_block(out, frame, stream.id_, end.end_stream);
  after_head(stream, end);
}

Session::HeadEnd Session::end_fields(const Stream& stream, net::Buffer& out, const http::ResponseFraming& framing) {
  if (framing.kind == http::ResponseFraming::Kind::kLength) encoder_.encode_content_length(framing.length, out);
  HeadEnd end{};
  end.interim = stream.status_ < 200;
  end.has_body = !end.interim && framing.kind != http::ResponseFraming::Kind::kNone && !framing.head_only;
  end.end_stream = !end.interim && !end.has_body;
  return end;
}

void Session::close_block(net::Buffer& out, FrameStart frame, uint32_t id, bool end_stream) {
  const size_t length = out.readable_bytes() - frame.payload_at;
  if (length <= peer_max_frame_) {
    end_frame(out, frame, FrameType::kHeaders, kFlagEndHeaders | (end_stream ? kFlagEndStream : 0), id);
    if (&out != &pending_) pending_.append(out.peek() + frame.payload_at - kFrameHeaderSize, kFrameHeaderSize + length);
    return;
  }
  // Larger than a frame: taken back and cut into HEADERS and CONTINUATION.
  block_out_.retrieve_all();
  block_out_.append(out.peek() + frame.payload_at, length);
  out.unwrite(kFrameHeaderSize + length);
  write_headers(pending_, id, block_out_.view(), end_stream, peer_max_frame_);
}

void Session::after_head(Stream& stream, HeadEnd end) {
  if (end.interim) return;
  stream.has_body_ = end.has_body;
  if (end.end_stream) {
    stream.response_sent_ = true;
    if (stream.reset_after_response_ && !stream.remote_ended_) {
      reset_stream(stream.id_, ErrorCode::kNoError);
    } else {
      closing_.push_back(stream.id_);  // at the next send(): a handler may be writing
    }
  }
}

}  // namespace tern::http2
