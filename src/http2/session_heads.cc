// http2::Session's heads: the connection's (the client's preface and what
// comes with it, answered by hand until a stream needs nghttp2), and each
// stream's, both ways: a request's decoded fields read back as HTTP/1.1
// text and parsed as HTTP/1 parses it (start), and a response's HTTP/1
// head, as the ResponseWriter wrote it, turned into HEADERS fields
// (submit_head). See session.h.
#include "http2/session.h"

#include <nghttp2/nghttp2.h>

#include <charconv>
#include <chrono>
#include <string>
#include <vector>

#include "base/assert.h"

namespace tern::http2 {
namespace {

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr size_t kFrameHeader = 9;
// The initial window of a connection (RFC 9113 6.9.2), and the largest.
constexpr uint64_t kInitialWindow = 65535;
constexpr uint64_t kMaxWindow = 0x7fffffff;

uint32_t read_u32(const char* p) {
  return uint32_t{static_cast<uint8_t>(p[0])} << 24 | uint32_t{static_cast<uint8_t>(p[1])} << 16 |
         uint32_t{static_cast<uint8_t>(p[2])} << 8 | uint32_t{static_cast<uint8_t>(p[3])};
}

void append_u32(std::string& out, uint32_t value) {
  out += {static_cast<char>(value >> 24), static_cast<char>(value >> 16), static_cast<char>(value >> 8),
          static_cast<char>(value)};
}

void append_frame_header(std::string& out, size_t length, uint8_t type, uint8_t flags) {
  out += {static_cast<char>(length >> 16), static_cast<char>(length >> 8), static_cast<char>(length),
          static_cast<char>(type), static_cast<char>(flags)};
  append_u32(out, 0);  // the connection's frames only
}

// HTTP/1 fields that describe a connection, which HTTP/2 forbids (RFC 9113
// 8.2.2); the names as lowered.
bool is_connection_field(std::string_view name) {
  return name == "connection" || name == "keep-alive" || name == "proxy-connection" ||
         name == "transfer-encoding" || name == "upgrade";
}

nghttp2_nv field(std::string_view name, std::string_view value) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

// The request head, complete: read back as HTTP/1.1 and parsed.
void Session::start(Stream& stream) {
  const bool end_stream = stream.body_complete_;
  Stream::RequestSide& req = *stream.req_;
  std::string text;
  text.reserve(req.head_text.size() + req.cookies.size() + req.path.size() + 96);
  text.append(req.method).append(" ").append(req.path).append(" HTTP/1.1\r\n");
  if (!req.authority.empty()) text.append("Host: ").append(req.authority).append("\r\n");
  text.append(req.head_text);
  if (!req.cookies.empty()) text.append("Cookie: ").append(req.cookies).append("\r\n");
  // A body of unknown length, as HTTP/1 would say it.
  if (!end_stream && !req.has_length_field) text.append("Transfer-Encoding: chunked\r\n");
  text.append("\r\n");
  req.head_text = std::move(text);
  req.cookies.clear();

  parser_.reset();
  const http::ParseStatus status = parser_.parse(req.head_text, &req.request);
  if (status != http::ParseStatus::kComplete) {
    // A head that HTTP/1 would refuse: the parser's status, and no more.
    const int code = status == http::ParseStatus::kError ? parser_.error_status() : 431;
    char digits[3] = {static_cast<char>('0' + code / 100), static_cast<char>('0' + code / 10 % 10),
                      static_cast<char>('0' + code % 10)};
    const nghttp2_nv fields[] = {field(":status", std::string_view(digits, 3)), field("content-length", "0")};
    nghttp2_submit_response(session_, stream.id_, fields, std::size(fields), nullptr);
    stream.started_ = false;  // the handlers never see it
    return;
  }
  req.request.set_version(http::Version::kHttp2);
  req.request.set_received_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::steady_clock::now().time_since_epoch()).count());
  callbacks_.on_request(stream);
}

void Session::submit_head(Stream& stream, const http::ResponseFraming& framing) {
  // "HTTP/1.1 200 OK\r\n", then "Name: value\r\n" per field (ResponseWriter's form).
  const std::string_view text = stream.head_.view();
  const size_t status_end = text.find("\r\n");
  TERN_CHECK_MSG(status_end != std::string_view::npos && status_end >= 12, "malformed response head");
  const std::string_view status = text.substr(9, 3);
  // The lowered names, and the fields pointing into it and into the head.
  std::string& names = head_scratch_.names;
  names.assign(text.size(), '\0');
  std::vector<nghttp2_nv>& fields = head_scratch_.fields;
  fields.clear();
  fields.push_back(field(":status", status));
  size_t at = status_end + 2;
  while (at < text.size()) {
    size_t end = text.find("\r\n", at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos) {
      char* lowered = names.data() + at;
      for (size_t i = 0; i < colon; ++i) lowered[i] = line[i] >= 'A' && line[i] <= 'Z' ? static_cast<char>(line[i] + 32) : line[i];
      const std::string_view name(lowered, colon);
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      if (!is_connection_field(name) && name != "content-length") fields.push_back(field(name, value));
    }
    at = end + 2;
  }
  char length_digits[24];
  if (framing.kind == http::ResponseFraming::Kind::kLength) {
    auto [end, ec] = std::to_chars(length_digits, length_digits + sizeof length_digits, framing.length);
    fields.push_back(field("content-length", std::string_view(length_digits, end)));
  }
  const bool interim = status.front() == '1';
  const bool has_body = !interim && framing.kind != http::ResponseFraming::Kind::kNone && !framing.head_only;
  if (interim) {
    nghttp2_submit_headers(session_, NGHTTP2_FLAG_NONE, stream.id_, nullptr, fields.data(), fields.size(), nullptr);
  } else {
    nghttp2_data_provider body = body_provider(stream);
    nghttp2_submit_response(session_, stream.id_, fields.data(), fields.size(), has_body ? &body : nullptr);
  }
  // nghttp2 copied the fields: the head's room goes (a stream may wait
  // long for its client to take the rest).
  stream.head_ = net::Buffer(0);
}

// ---- the connection's preface, by hand ----
//
// A connection that sends its preface and nothing more costs the memory of
// nghttp2's session (some 25 KiB with its buffers and tables) for as long as
// it stays. Until the first frame that needs it, the client's frames are
// answered here as nghttp2 would answer them: our SETTINGS, the
// connection's window opened, SETTINGS and PING acknowledged. What was
// answered is kept (PINGs aside) and read by nghttp2 once it is made, for
// its state; its own answers to it, sent already, are dropped.

// Every whole frame received since the last call is one answered here, or
// none is (false: the session is made, and nghttp2 reads them all).
bool Session::answer_asleep() {
  std::string& in = asleep_.in;
  if (asleep_.answered == 0) {
    const std::string_view start = std::string_view(in).substr(0, kPreface.size());
    if (!kPreface.starts_with(start)) return false;  // nghttp2 says what is wrong
    if (start.size() < kPreface.size()) return true;
    asleep_.answered = kPreface.size();
  }
  const auto frame_at = [&in](size_t at, size_t* length) {
    if (in.size() - at < kFrameHeader) return false;
    *length = size_t{static_cast<uint8_t>(in[at])} << 16 | size_t{static_cast<uint8_t>(in[at + 1])} << 8 |
              static_cast<uint8_t>(in[at + 2]);
    return in.size() - at - kFrameHeader >= *length;
  };
  uint64_t window = asleep_.window;
  size_t length = 0;
  for (size_t at = asleep_.answered; frame_at(at, &length); at += kFrameHeader + length) {
    if (!answerable(static_cast<uint8_t>(in[at + 3]), static_cast<uint8_t>(in[at + 4]),
                    read_u32(in.data() + at + 5) & 0x7fffffff, std::string_view(in).substr(at + kFrameHeader, length),
                    &window)) {
      return false;
    }
  }
  asleep_.window = window;
  for (size_t at = asleep_.answered; frame_at(at, &length);) {
    const auto type = static_cast<uint8_t>(in[at + 3]);
    const auto flags = static_cast<uint8_t>(in[at + 4]);
    if (type != NGHTTP2_WINDOW_UPDATE && !charge_control_frame()) {
      error_ = "flood of control frames (SETTINGS, PING, PRIORITY, RST_STREAM or empty DATA)";
      fatal_code_ = NGHTTP2_ENHANCE_YOUR_CALM;
      return true;
    }
    if (type == NGHTTP2_PING) {
      // Answered with its payload, and not kept: it changes no state.
      append_frame_header(asleep_.out, 8, NGHTTP2_PING, NGHTTP2_FLAG_ACK);
      asleep_.out.append(in, at + kFrameHeader, 8);
      in.erase(at, kFrameHeader + length);
      continue;
    }
    if (type == NGHTTP2_SETTINGS && (flags & NGHTTP2_FLAG_ACK) == 0) {
      append_frame_header(asleep_.out, 0, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK);
    }
    at += kFrameHeader + length;
    asleep_.answered = at;
  }
  return true;
}

// Valid settings (or their acknowledgement), a PING, a WINDOW_UPDATE of
// the connection's window: all the connection's, changing nothing a stream
// would see. Anything doubtful is nghttp2's to judge.
bool Session::answerable(uint8_t type, uint8_t flags, uint32_t stream_id, std::string_view payload,
                         uint64_t* window) const {
  if (stream_id != 0) return false;
  switch (type) {
    case NGHTTP2_SETTINGS:
      if ((flags & NGHTTP2_FLAG_ACK) != 0) return payload.empty();
      if (payload.size() % 6 != 0 || payload.size() > 10 * 6) return false;
      for (size_t i = 0; i < payload.size(); i += 6) {
        const unsigned id = static_cast<uint8_t>(payload[i]) << 8 | static_cast<uint8_t>(payload[i + 1]);
        const uint32_t value = read_u32(payload.data() + i + 2);
        switch (id) {
          case NGHTTP2_SETTINGS_ENABLE_PUSH:
          case NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL:
            if (value > 1) return false;
            break;
          case NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE:
            if (value > kMaxWindow) return false;
            break;
          case NGHTTP2_SETTINGS_MAX_FRAME_SIZE:
            if (value < (1u << 14) || value >= (1u << 24)) return false;
            break;
          case NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES:
            return false;  // may not change once said: nghttp2 keeps track
          default:
            break;  // the others take any value; unknown ones are ignored
        }
      }
      return true;
    case NGHTTP2_PING:
      return (flags & NGHTTP2_FLAG_ACK) == 0 && payload.size() == 8;
    case NGHTTP2_WINDOW_UPDATE: {
      if (payload.size() != 4) return false;
      const uint32_t increment = read_u32(payload.data()) & 0x7fffffff;
      if (increment == 0 || *window + increment > kMaxWindow) return false;
      *window += increment;
      return true;
    }
    default:
      return false;
  }
}

void Session::send_asleep(net::Buffer& out) {
  if (!asleep_.greeted) {
    // What nghttp2 sends first: our SETTINGS, and the connection's window
    // opened to ours.
    const std::pair<uint16_t, uint32_t> settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits_.max_concurrent_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, limits_.stream_window},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<uint32_t>(limits_.parser.max_head_bytes)},
    };
    std::string greeting;
    append_frame_header(greeting, 6 * std::size(settings), NGHTTP2_SETTINGS, NGHTTP2_FLAG_NONE);
    for (const auto& [id, value] : settings) {
      greeting += {static_cast<char>(id >> 8), static_cast<char>(id)};
      append_u32(greeting, value);
    }
    if (limits_.connection_window > kInitialWindow) {
      append_frame_header(greeting, 4, NGHTTP2_WINDOW_UPDATE, NGHTTP2_FLAG_NONE);
      append_u32(greeting, static_cast<uint32_t>(limits_.connection_window - kInitialWindow));
    }
    out.append(greeting);
    asleep_.greeted = true;
  }
  out.append(asleep_.out);
  asleep_.out.clear();
}

std::string Session::wake() {
  make_nghttp2_session();
  std::string rest;
  if (asleep_.greeted) {
    // What was answered, read again for nghttp2's state (the client's
    // settings and window); its answers went out already, by hand.
    replaying_ = true;
    const ssize_t read = nghttp2_session_mem_recv(
        session_, reinterpret_cast<const uint8_t*>(asleep_.in.data()), asleep_.answered);
    replaying_ = false;
    for (const uint8_t* data = nullptr; nghttp2_session_mem_send(session_, &data) > 0;) {
    }
    if (read != static_cast<ssize_t>(asleep_.answered)) {
      // Cannot be (each was checked first); should it be, the connection ends.
      error_ = "nghttp2 refused what was answered by hand";
      fatal_code_ = NGHTTP2_INTERNAL_ERROR;
    }
    if (asleep_.answered > 0) scan_.preface = 0;
    rest = asleep_.in.substr(asleep_.answered);
  } else {
    // Nothing went out: nghttp2 answers all of it itself.
    asleep_.out.clear();
    asleep_.greeted = true;
    rest = std::move(asleep_.in);
  }
  std::string().swap(asleep_.in);
  return rest;
}

}  // namespace tern::http2
