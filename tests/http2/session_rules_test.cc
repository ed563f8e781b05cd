// http2::Session against frames written by hand (tern's own frame writer
// and HPACK encoder): the same conversation in any pieces gives the same
// answer, and the rules of RFC 9113 that a well-behaved client never
// breaks (a body longer than its content-length, DATA past a stream's
// window or after its end, HEADERS on a stream the client reset) end the
// stream or the connection as the RFC says. Streams with bodies take turns.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "http/response_writer.h"
#include "http2/frame_reader.h"
#include "http2/frame_writer.h"
#include "http2/hpack_decoder.h"
#include "http2/hpack_encoder.h"
#include "http2/session.h"

namespace tern::http2 {
namespace {

// A client's frames, as bytes.
class Wire {
 public:
  Wire() : encoder_(HpackEncoder::Settings{.huffman = false}) {}

  Wire& preface() {
    bytes_.append(kClientPreface);
    write_settings(out_, {});
    return take();
  }
  Wire& headers(uint32_t id, std::vector<std::pair<std::string, std::string>> fields, bool end_stream) {
    net::Buffer block;
    for (const auto& [name, value] : fields) encoder_.encode(name, value, block);
    write_headers(out_, id, block.view(), end_stream, kDefaultMaxFrameSize);
    return take();
  }
  Wire& get(uint32_t id, std::string path = "/") {
    return headers(id, {{":method", "GET"}, {":scheme", "http"}, {":authority", "a"}, {":path", path}}, true);
  }
  Wire& post(uint32_t id, std::vector<std::pair<std::string, std::string>> more = {}) {
    std::vector<std::pair<std::string, std::string>> fields = {
        {":method", "POST"}, {":scheme", "http"}, {":authority", "a"}, {":path", "/up"}};
    fields.insert(fields.end(), more.begin(), more.end());
    return headers(id, fields, false);
  }
  Wire& data(uint32_t id, std::string_view payload, bool end_stream) {
    write_data(out_, id, payload, end_stream);
    return take();
  }
  Wire& rst(uint32_t id) {
    write_rst_stream(out_, id, ErrorCode::kCancel);
    return take();
  }
  Wire& ping(uint64_t opaque) {
    write_ping(out_, opaque, false);
    return take();
  }
  Wire& window(uint32_t id, uint32_t increment) {
    write_window_update(out_, id, increment);
    return take();
  }
  std::string bytes() {
    std::string all = std::move(bytes_);
    bytes_.clear();
    return all;
  }

 private:
  Wire& take() {
    bytes_.append(out_.view());
    out_.retrieve_all();
    return *this;
  }
  HpackEncoder encoder_;
  net::Buffer out_;
  std::string bytes_;
};

struct SeenFrame {
  FrameType type;
  uint8_t flags;
  uint32_t stream_id;
  std::string payload;
};

std::vector<SeenFrame> frames_of(std::string_view out) {
  std::vector<SeenFrame> frames;
  for (;;) {
    const ReadResult r = read_frame(out, kMaxFrameSizeLimit);
    if (r.status != ReadStatus::kFrame) break;
    frames.push_back({r.frame.header.type, r.frame.header.flags, r.frame.header.stream_id,
                      std::string(r.frame.payload)});
    out.remove_prefix(r.size);
  }
  EXPECT_TRUE(out.empty()) << "output ends inside a frame";
  return frames;
}

// The code of the RST_STREAM on `id`, or -1.
int64_t reset_code(const std::vector<SeenFrame>& frames, uint32_t id) {
  for (const SeenFrame& f : frames) {
    if (f.type == FrameType::kRstStream && f.stream_id == id) return load_u32(f.payload.data());
  }
  return -1;
}

int64_t goaway_code(const std::vector<SeenFrame>& frames) {
  for (const SeenFrame& f : frames) {
    if (f.type == FrameType::kGoaway) return load_u32(f.payload.data() + 4);
  }
  return -1;
}

class SessionRulesTest : public ::testing::Test {
 protected:
  SessionRulesTest() { make(); }
  ~SessionRulesTest() override { session_.reset(); }

  void make() {
    Session::Callbacks callbacks;
    callbacks.on_request = [this](Stream& stream) {
      requests.push_back(std::string(stream.request().method_text()) + " " +
                         std::string(stream.request().target()));
      if (on_request) on_request(stream);
    };
    callbacks.on_body = [this](Stream& stream, std::string_view piece, bool last) {
      bodies[stream.id()] += piece;
      if (last) bodies[stream.id()] += "<end>";
    };
    callbacks.on_close = [](Stream&) {};
    session_ = std::make_unique<Session>(limits, std::move(callbacks));
  }

  std::vector<SeenFrame> drain() {
    net::Buffer out;
    while (session_->wants_to_send()) {
      const size_t before = out.readable_bytes();
      session_->send(out);
      if (out.readable_bytes() == before) break;
    }
    return frames_of(out.view());
  }

  static void respond(Stream& stream, std::string_view body) {
    http::ResponseWriter::Context context;
    context.stream = &stream;
    http::ResponseWriter writer(context);
    writer.start(200).header("Content-Type", "text/plain").body(body);
  }

  SessionLimits limits;
  std::unique_ptr<Session> session_;
  std::vector<std::string> requests;
  std::map<int32_t, std::string> bodies;
  std::function<void(Stream&)> on_request;
};

TEST_F(SessionRulesTest, AConversationInAnyPiecesGetsTheSameAnswer) {
  Wire wire;
  wire.preface().get(1, "/a").post(3, {{"content-length", "11"}}).data(3, "hello ", false).ping(7);
  wire.data(3, "world", true).get(5, "/b?q=1");
  const std::string conversation = wire.bytes();

  std::vector<std::vector<SeenFrame>> answers;
  std::vector<std::vector<std::string>> seen;
  const auto run = [&](const std::vector<size_t>& cuts) {
    make();
    requests.clear();
    bodies.clear();
    on_request = [](Stream& stream) { respond(stream, "ok"); };
    size_t at = 0;
    for (size_t cut : cuts) {
      ASSERT_TRUE(session_->receive(std::string_view(conversation).substr(at, cut - at))) << "cut at " << cut;
      at = cut;
    }
    ASSERT_TRUE(session_->receive(std::string_view(conversation).substr(at)));
    answers.push_back(drain());
    seen.push_back(requests);
    EXPECT_EQ(bodies[3], "hello world<end>");
  };
  run({});
  std::vector<size_t> every_byte;
  for (size_t i = 1; i < conversation.size(); ++i) every_byte.push_back(i);
  run(every_byte);
  std::mt19937 random(2026);
  for (int round = 0; round < 50; ++round) {
    std::vector<size_t> cuts;
    for (size_t at = random() % 40 + 1; at < conversation.size(); at += random() % 40 + 1) cuts.push_back(at);
    run(cuts);
  }
  ASSERT_EQ(seen[0], (std::vector<std::string>{"GET /a", "POST /up", "GET /b?q=1"}));
  // When a read ends decides when its requests are answered, so frames of
  // different streams may come in another order: each stream's own, and
  // the connection's, are the same.
  const auto by_stream = [](const std::vector<SeenFrame>& frames) {
    HpackDecoder decoder;
    std::map<uint32_t, std::vector<std::string>> streams;
    for (const SeenFrame& f : frames) {
      std::string text = std::to_string(static_cast<int>(f.type)) + "/" + std::to_string(f.flags) + ":";
      if (f.type == FrameType::kHeaders) {
        EXPECT_EQ(decoder.decode(f.payload, [&](const HpackField& field) {
          text.append(field.name).append("=").append(field.value).append(";");
        }), HpackError::kOk);
      } else {
        text += f.payload;
      }
      streams[f.stream_id].push_back(text);
    }
    std::sort(streams[0].begin(), streams[0].end());
    return streams;
  };
  const auto expected = by_stream(answers[0]);
  EXPECT_EQ(expected.size(), 4u);  // the connection's, and three streams
  for (size_t i = 1; i < answers.size(); ++i) {
    EXPECT_EQ(seen[i], seen[0]) << "round " << i;
    EXPECT_EQ(by_stream(answers[i]), expected) << "round " << i;
  }
}

TEST_F(SessionRulesTest, ABodyThatDisagreesWithItsContentLengthResetsTheStream) {
  Wire wire;
  wire.preface().post(1, {{"content-length", "5"}}).data(1, "abc", true);
  wire.post(3, {{"content-length", "2"}}).data(3, "abc", false);
  wire.headers(5, {{":method", "POST"}, {":scheme", "http"}, {":authority", "a"}, {":path", "/"},
                   {"content-length", "4"}}, true);
  ASSERT_TRUE(session_->receive(wire.bytes()));
  const auto frames = drain();
  EXPECT_EQ(reset_code(frames, 1), static_cast<int64_t>(ErrorCode::kProtocolError));
  EXPECT_EQ(reset_code(frames, 3), static_cast<int64_t>(ErrorCode::kProtocolError));
  EXPECT_EQ(reset_code(frames, 5), static_cast<int64_t>(ErrorCode::kProtocolError));
  EXPECT_EQ(goaway_code(frames), -1);
}

TEST_F(SessionRulesTest, DataPastAStreamsWindowResetsOnlyThatStream) {
  on_request = [](Stream& stream) { stream.pause_body(); };
  Wire wire;
  wire.preface().post(1);
  const std::string chunk(16384, 'x');
  for (int i = 0; i < 4; ++i) wire.data(1, chunk, false);  // held: the handler paused its body
  ASSERT_TRUE(session_->receive(wire.bytes()));
  const size_t window = std::max<size_t>(limits.stream_window, kDefaultInitialWindowSize);
  // Past the window the stream was given (the client was never credited).
  Wire more;
  for (size_t sent = 4 * chunk.size(); sent <= window; sent += chunk.size()) more.data(1, chunk, false);
  more.get(3);
  on_request = [](Stream& stream) { respond(stream, "fine"); };
  ASSERT_TRUE(session_->receive(more.bytes()));
  const auto frames = drain();
  EXPECT_EQ(reset_code(frames, 1), static_cast<int64_t>(ErrorCode::kFlowControlError));
  EXPECT_EQ(goaway_code(frames), -1);
  EXPECT_EQ(requests.back(), "GET /");
}

TEST_F(SessionRulesTest, FramesAfterTheClientEndedOrResetAStreamAreErrors) {
  on_request = [](Stream&) {};  // left open
  Wire wire;
  wire.preface().get(1).data(1, "late", false);
  ASSERT_TRUE(session_->receive(wire.bytes()));
  EXPECT_EQ(reset_code(drain(), 1), static_cast<int64_t>(ErrorCode::kStreamClosed));

  make();
  Wire again;
  again.preface().post(1).rst(1).get(1);
  EXPECT_FALSE(session_->receive(again.bytes()));
  EXPECT_EQ(goaway_code(drain()), static_cast<int64_t>(ErrorCode::kStreamClosed));
}

TEST_F(SessionRulesTest, FieldsHttp2ForbidsResetTheStream) {
  Wire wire;
  wire.preface();
  wire.headers(1, {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {"X-Upper", "1"}}, true);
  wire.headers(3, {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":protocol", "x"}}, true);
  wire.headers(5, {{":method", "GET"}, {":scheme", "http"}, {"a", "b"}, {":path", "/"}}, true);
  wire.headers(7, {{":method", "GET"}, {":scheme", "http"}, {":path", ""}}, true);
  wire.headers(9, {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {"te", "gzip"}}, true);
  wire.headers(11, {{":method", "GET"}, {":path", "/"}}, true);
  // Names the static table holds, which the session knows by their index:
  // a connection-specific one, a response's pseudo-field, a repeated one.
  wire.headers(13, {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {"transfer-encoding", "chunked"}}, true);
  wire.headers(15, {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":status", "200"}}, true);
  wire.headers(17, {{":method", "GET"}, {":method", "POST"}, {":scheme", "http"}, {":path", "/"}}, true);
  wire.headers(19, {{":method", "GET"}, {":scheme", "http"}, {"accept", "*/*"}, {":path", "/"}}, true);
  ASSERT_TRUE(session_->receive(wire.bytes()));
  const auto frames = drain();
  for (uint32_t id = 1; id <= 19; id += 2) {
    EXPECT_EQ(reset_code(frames, id), static_cast<int64_t>(ErrorCode::kProtocolError)) << "stream " << id;
  }
  EXPECT_TRUE(requests.empty());
  EXPECT_EQ(goaway_code(frames), -1);
}

TEST_F(SessionRulesTest, StreamsWithBodiesTakeTurnsAFrameEach) {
  on_request = [](Stream& stream) { respond(stream, std::string(40000, 'b')); };
  Wire wire;
  wire.preface().window(0, 1 << 20);
  wire.get(1).get(3);
  ASSERT_TRUE(session_->receive(wire.bytes()));
  std::vector<uint32_t> order;
  size_t body_bytes = 0;
  for (const SeenFrame& f : drain()) {
    if (f.type != FrameType::kData) continue;
    order.push_back(f.stream_id);
    body_bytes += f.payload.size();
  }
  // The client's default window (65,535 a stream) lets 2 x 40,000 go.
  EXPECT_EQ(body_bytes, 80000u);
  ASSERT_GE(order.size(), 4u);
  EXPECT_EQ(order[0], 1u);
  EXPECT_EQ(order[1], 3u);
  EXPECT_EQ(order[2], 1u);
  EXPECT_EQ(order[3], 3u);
}

TEST_F(SessionRulesTest, AStreamResetTwiceSendsOneRstStream) {
  on_request = [](Stream& stream) {
    stream.reset(ErrorCode::kCancel);
    stream.reset(ErrorCode::kInternalError);
  };
  Wire wire;
  wire.preface().get(1);
  ASSERT_TRUE(session_->receive(wire.bytes()));
  const auto frames = drain();
  EXPECT_EQ(std::count_if(frames.begin(), frames.end(),
                          [](const SeenFrame& f) { return f.type == FrameType::kRstStream; }),
            1);
  EXPECT_EQ(reset_code(frames, 1), static_cast<int64_t>(ErrorCode::kCancel));
  EXPECT_EQ(session_->open_streams(), 0u);
}

TEST_F(SessionRulesTest, AClientThatDoesNotReadItsAnswersIsCutOff) {
  limits.control_burst = 1000000;
  make();
  Wire wire;
  wire.preface();
  for (uint64_t i = 0; i < 70000; ++i) wire.ping(i);
  EXPECT_FALSE(session_->receive(wire.bytes()));
  EXPECT_EQ(goaway_code(drain()), static_cast<int64_t>(ErrorCode::kEnhanceYourCalm));
  EXPECT_NE(session_->error().find("does not read"), std::string_view::npos);
}

// The :status of the first HEADERS on `id` (one HPACK decoder reads every
// HEADERS in order, as a client does), or "".
std::string status_of(const std::vector<SeenFrame>& frames, uint32_t id) {
  HpackDecoder decoder;
  std::string status;
  for (const SeenFrame& f : frames) {
    if (f.type != FrameType::kHeaders) continue;
    std::string seen;
    EXPECT_EQ(decoder.decode(f.payload, [&](const HpackField& field) {
      if (field.name == ":status") seen = field.value;
    }), HpackError::kOk);
    if (f.stream_id == id && status.empty()) status = seen;
  }
  return status;
}

TEST_F(SessionRulesTest, ARequestReachesItsHandlerAsHttp1WouldHandItOver) {
  std::vector<std::string> seen;
  on_request = [&](Stream& stream) {
    const http::Request& r = stream.request();
    seen.push_back(std::string(r.scheme()) + " " + std::string(r.host()) + " " + std::string(r.path()) + " " +
                   std::string(r.query()) + " " + std::string(http::version_name(r.version())) + " ua=" +
                   std::string(r.header(http::FieldId::kUserAgent)) + " cookie=" +
                   std::string(r.header(http::FieldId::kCookie)) + " x=" + std::string(r.header("X-Custom")) +
                   " id=" + std::to_string(static_cast<int>(r.headers()[0].id)));
    respond(stream, "ok");
  };
  Wire wire;
  wire.preface();
  wire.headers(1, {{":method", "GET"}, {":scheme", "https"}, {":authority", "a.example"}, {":path", "/p?q=1"},
                   {"user-agent", "t/1"}, {"cookie", "a=1"}, {"x-custom", " padded\t"}, {"cookie", "b=2"}},
               true);
  // A Host field alone names the host; beside :authority it must agree.
  wire.headers(3, {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {"host", "h.example"}}, true);
  wire.headers(5, {{":method", "GET"}, {":scheme", "http"}, {":authority", "a"}, {":path", "/"}, {"host", "b"}},
               true);
  ASSERT_TRUE(session_->receive(wire.bytes()));
  const auto frames = drain();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], "https a.example /p q=1 HTTP/2.0 ua=t/1 cookie=a=1; b=2 x=padded id=" +
                         std::to_string(static_cast<int>(http::FieldId::kUserAgent)));
  EXPECT_EQ(seen[1], "http h.example /  HTTP/2.0 ua= cookie= x= id=" +
                         std::to_string(static_cast<int>(http::FieldId::kHost)));
  EXPECT_EQ(status_of(frames, 1), "200");
  EXPECT_EQ(status_of(frames, 3), "200");
  EXPECT_EQ(status_of(frames, 5), "400");
}

TEST_F(SessionRulesTest, HeadsHttp1WouldRefuseGetItsStatus) {
  limits.parser.max_target = 64;
  limits.parser.max_headers = 3;
  make();
  Wire wire;
  wire.preface();
  wire.get(1, "/" + std::string(64, 'a'));
  wire.get(3, "/a b");
  wire.headers(5, {{":method", "GET"}, {":scheme", "http"}, {":authority", "a"}, {":path", "/"}, {"a", "1"},
                   {"b", "2"}, {"c", "3"}, {"d", "4"}}, true);
  wire.headers(7, {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}}, true);  // no host at all
  wire.headers(9, {{":method", "GET"}, {":scheme", "http"}, {":authority", "a b"}, {":path", "/"}}, true);
  wire.headers(11, {{":method", "GET"}, {":scheme", "http"}, {":authority", "a"}, {":path", "/"},
                    {"x", std::string("a\x01b", 3)}}, true);
  // The same field again comes as an index into the table the first put
  // it in: refused the same, as the entry remembers what its value holds.
  wire.headers(13, {{":method", "GET"}, {":scheme", "http"}, {":authority", "a"}, {":path", "/"},
                    {"x", std::string("a\x01b", 3)}}, true);
  ASSERT_TRUE(session_->receive(wire.bytes()));
  const auto frames = drain();
  EXPECT_TRUE(requests.empty());
  EXPECT_EQ(status_of(frames, 1), "414");
  EXPECT_EQ(status_of(frames, 3), "400");
  EXPECT_EQ(status_of(frames, 5), "431");
  EXPECT_EQ(status_of(frames, 7), "400");
  EXPECT_EQ(status_of(frames, 9), "400");
  // A control byte in a value: malformed (8.2.1 and RFC 9110 5.5).
  EXPECT_EQ(reset_code(frames, 11), static_cast<int64_t>(ErrorCode::kProtocolError));
  EXPECT_EQ(reset_code(frames, 13), static_cast<int64_t>(ErrorCode::kProtocolError));
  EXPECT_EQ(goaway_code(frames), -1);
}

TEST_F(SessionRulesTest, AResponseHeadIsItsStatusAndFieldsInOrderWithHttp1sOwnLeftOut) {
  http::FieldBlock block;
  block.add("Content-Type", "text/plain");
  block.add("X-Block", "b");
  http::ExtraFields extra;
  extra.always.add("X-Always", "a");
  extra.success.add("X-Success", "s");
  on_request = [&](Stream& stream) {
    http::ResponseWriter::Context context;
    context.stream = &stream;
    context.server = "tern";
    context.date = "Sun, 06 Nov 1994 08:49:37 GMT";
    http::ResponseWriter writer(context);
    writer.set_extra_fields(&extra);
    writer.start(stream.id() == 1 ? 201 : 404, "Ignored Reason").fields(block);
    writer.header("Connection", "close").header("Keep-Alive", "timeout=5").header("X-Mixed-Case", "v");
    writer.header("Content-Length", "99").body("abc");
  };
  Wire wire;
  wire.preface().get(1).get(3);
  ASSERT_TRUE(session_->receive(wire.bytes()));
  const auto frames = drain();
  HpackDecoder decoder;
  std::map<uint32_t, std::string> heads;
  for (const SeenFrame& f : frames) {
    if (f.type != FrameType::kHeaders) continue;
    ASSERT_EQ(decoder.decode(f.payload, [&](const HpackField& field) {
      heads[f.stream_id] += std::string(field.name) + "=" + std::string(field.value) + ";";
    }), HpackError::kOk);
  }
  EXPECT_EQ(heads[1], ":status=201;server=tern;date=Sun, 06 Nov 1994 08:49:37 GMT;content-type=text/plain;"
                      "x-block=b;x-mixed-case=v;x-always=a;x-success=s;content-length=3;");
  // Not a success: the success fields stay out (as nginx's add_header).
  EXPECT_EQ(heads[3], ":status=404;server=tern;date=Sun, 06 Nov 1994 08:49:37 GMT;content-type=text/plain;"
                      "x-block=b;x-mixed-case=v;x-always=a;content-length=3;");
}

}  // namespace
}  // namespace tern::http2
