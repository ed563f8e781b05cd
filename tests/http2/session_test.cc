// http2::Session against nghttp2's own client session, bytes passed in
// memory: requests reach the handler as the HTTP/1 requests they are,
// responses written through a ResponseWriter arrive as HEADERS and DATA,
// bodies flow both ways under flow control, and what HTTP/2 forbids or a
// bad head is refused.
#include "http2/session.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "http/response_writer.h"
#include "support/h2_client.h"
#include "support/temp_dir.h"

namespace tern::http2 {
namespace {

using tern::testing::H2Client;
using tern::testing::H2Response;

class SessionTest : public ::testing::Test {
 protected:
  SessionTest() { make(); }
  // The session first: it ends the streams still open, through callbacks
  // that write to the members below it.
  ~SessionTest() override { session_.reset(); }

  // A new session with `limits` as they are now.
  void make() {
    Session::Callbacks callbacks;
    callbacks.on_request = [this](Stream& stream) {
      requests.push_back(std::string(stream.request().method_text()));
      if (on_request) on_request(stream);
    };
    callbacks.on_body = [this](Stream& stream, std::string_view piece, bool last) {
      bodies[stream.id()] += piece;
      if (last) body_ended[stream.id()] = true;
      if (on_body) on_body(stream, piece, last);
    };
    callbacks.on_close = [this](Stream& stream) { closed.push_back(stream.id()); };
    callbacks.on_drained = [this](Stream& stream) {
      if (on_drained) on_drained(stream);
    };
    session_ = std::make_unique<Session>(limits, std::move(callbacks), spares);
  }

  // Passes bytes both ways until neither side has more; false if the
  // server refused what it got.
  bool exchange() { return exchange(client, *session_); }
  static bool exchange(H2Client& client, Session& session) {
    for (int turns = 0; turns < 10000; ++turns) {
      const std::string to_server = client.output();
      // As the connection does: what the session says goes out, its
      // GOAWAY after a refusal too.
      const bool ok = to_server.empty() || session.receive(to_server);
      net::Buffer out;
      session.send(out);
      if (out.readable_bytes() > 0) client.input(out.view());
      if (!ok) return false;
      if (to_server.empty() && out.readable_bytes() == 0) return true;
    }
    return false;
  }

  // A response written as handlers write them.
  static void respond(Stream& stream, int status, std::string_view body, bool head_only = false) {
    http::ResponseWriter::Context context;
    context.stream = &stream;
    context.head_only = head_only;
    context.date = "Thu, 26 Nov 2026 18:00:00 GMT";
    context.server = "tern";
    http::ResponseWriter writer(context);
    writer.start(status).header("Content-Type", "text/plain").header("X-Custom", "yes").body(body);
  }

  SessionLimits limits;
  std::shared_ptr<StreamSpares> spares;  // the session's own unless set
  H2Client client;
  std::unique_ptr<Session> session_;
  std::vector<std::string> requests;
  std::map<int32_t, std::string> bodies;
  std::map<int32_t, bool> body_ended;
  std::vector<int32_t> closed;
  std::function<void(Stream&)> on_request;
  std::function<void(Stream&, std::string_view, bool)> on_body;
  std::function<void(Stream&)> on_drained;
};

TEST_F(SessionTest, ARequestReachesTheHandlerAsHttp1AndItsResponseComesBackAsFrames) {
  std::string seen_head;
  on_request = [&](Stream& stream) {
    const http::Request& r = stream.request();
    EXPECT_EQ(r.method(), http::Method::kGet);
    EXPECT_EQ(r.target(), "/a/b?c=1");
    EXPECT_EQ(r.path(), "/a/b");
    EXPECT_EQ(r.host(), "example.test");
    EXPECT_EQ(r.header("accept"), "text/html");
    EXPECT_EQ(r.header("cookie"), "a=1; b=2");  // two cookie fields, one for HTTP/1
    EXPECT_EQ(r.body_framing(), http::BodyFraming::kNone);
    EXPECT_TRUE(stream.body_complete());
    respond(stream, 200, "hello");
  };
  const int32_t id = client.request({{":method", "GET"},
                                     {":scheme", "https"},
                                     {":authority", "example.test"},
                                     {":path", "/a/b?c=1"},
                                     {"accept", "text/html"},
                                     {"cookie", "a=1"},
                                     {"cookie", "b=2"}});
  ASSERT_TRUE(exchange());
  ASSERT_EQ(requests.size(), 1u);
  const H2Response& seen = client.seen[id];
  EXPECT_TRUE(seen.closed);
  EXPECT_EQ(seen.error_code, 0u);
  EXPECT_EQ(seen.fields.at(":status"), "200");
  EXPECT_EQ(seen.fields.at("content-type"), "text/plain");  // names in lower case
  EXPECT_EQ(seen.fields.at("x-custom"), "yes");
  EXPECT_EQ(seen.fields.at("content-length"), "5");
  EXPECT_EQ(seen.fields.at("server"), "tern");
  EXPECT_EQ(seen.fields.count("connection"), 0u);  // HTTP/2 has none
  EXPECT_EQ(seen.body, "hello");
  EXPECT_EQ(closed, std::vector<int32_t>{id});
}

// A head is encoded straight into one HEADERS frame; one past the
// client's frame size is taken back and cut into HEADERS and CONTINUATION,
// and the next response on the connection still decodes (the HPACK tables
// agree). HTTP/1's own fields and a written Content-Length are left out.
TEST_F(SessionTest, AHeadLargerThanAFrameGoesOnInContinuationFrames) {
  const std::string large(9000, 'v');
  on_request = [&](Stream& stream) {
    http::ResponseWriter::Context context;
    context.stream = &stream;
    context.server = "tern";
    http::ResponseWriter writer(context);
    writer.start(200).header("Connection", "keep-alive").header("Content-Length", "99");
    if (stream.request().path() == "/large") writer.header("X-One", large).header("X-Two", large);
    writer.header("X-After", "end").body("ok");
  };
  const int32_t first = client.get("/large");
  ASSERT_TRUE(exchange());
  const int32_t second = client.get("/small");
  ASSERT_TRUE(exchange());
  for (const int32_t id : {first, second}) {
    const H2Response& seen = client.seen[id];
    EXPECT_TRUE(seen.closed);
    EXPECT_EQ(seen.error_code, 0u);
    EXPECT_EQ(seen.fields.at(":status"), "200");
    EXPECT_EQ(seen.fields.at("x-after"), "end");
    EXPECT_EQ(seen.fields.at("content-length"), "2");  // from the framing, not the handler's
    EXPECT_EQ(seen.fields.count("connection"), 0u);
    EXPECT_EQ(seen.body, "ok");
  }
  EXPECT_EQ(client.seen[first].fields.at("x-one"), large);
  EXPECT_EQ(client.seen[first].fields.at("x-two"), large);
  EXPECT_EQ(client.seen[second].fields.count("x-one"), 0u);
}

// A body that stays valid while its owner is held (a cached file's bytes)
// is queued by reference: the owner is held until the last frame of it
// is made, then let go, and the bytes arrive as written.
TEST_F(SessionTest, AKeptBodyIsHeldByItsOwnerUntilSent) {
  auto owner = std::make_shared<std::string>(100 * 1024, 'k');
  (*owner)[0] = 'f';
  on_request = [&](Stream& stream) {
    http::ResponseWriter::Context context;
    context.stream = &stream;
    http::ResponseWriter writer(context);
    writer.start(200).body(*owner, owner);
  };
  const int32_t id = client.get("/kept");
  std::string to_server = client.output();
  ASSERT_TRUE(session_->receive(to_server));
  EXPECT_GT(owner.use_count(), 1);  // queued: the client's window holds most of it back
  ASSERT_TRUE(exchange());
  EXPECT_EQ(client.seen[id].body, *owner);
  EXPECT_EQ(client.seen[id].fields.at("content-length"), std::to_string(100 * 1024));
  EXPECT_EQ(owner.use_count(), 1);
}

// A head is encoded as the handler gives it, into the connection's one
// HPACK table: while one is open, another stream's head still goes out
// (with the static table only) and the open one after it; a head whose
// stream is reset before it ends is never sent, and the tables start
// over; a change of the client's table size waits for the open head, its
// acknowledgement too. Through all of it nghttp2 decodes every block.
class OpenHeadTest : public SessionTest {
 protected:
  OpenHeadTest() {
    on_request = [this](Stream& stream) {
      if (stream.request().path() == "/slow") {
        slow = &stream;
        http::ResponseWriter::Context context;
        context.stream = &stream;
        context.server = "tern";
        context.date = "Thu, 26 Nov 2026 18:00:00 GMT";
        writer = std::make_unique<http::ResponseWriter>(context);
        writer->start(200).header("X-Slow-Field", "first half");  // a new entry in the table
        return;
      }
      respond(stream, 200, "quick");
    };
  }
  // A quick exchange first, whose fields enter the table (a head that
  // indexed them one place off would show), then /slow's head left open.
  // Its stream's id.
  int32_t open_slow_head_after_a_quick_one() {
    const int32_t first = client.get("/quick");
    EXPECT_TRUE(exchange());
    EXPECT_EQ(client.seen[first].body, "quick");
    const int32_t slow_id = client.get("/slow");
    EXPECT_TRUE(exchange());
    EXPECT_NE(slow, nullptr);
    return slow_id;
  }
  Stream* slow = nullptr;
  std::unique_ptr<http::ResponseWriter> writer;
};

TEST_F(OpenHeadTest, AnotherStreamsHeadGoesOutWhileOneIsOpen) {
  const int32_t slow_id = open_slow_head_after_a_quick_one();
  ASSERT_NE(slow, nullptr);
  const int32_t quick = client.get("/quick");
  ASSERT_TRUE(exchange());
  EXPECT_TRUE(client.seen[quick].closed);
  EXPECT_EQ(client.seen[quick].fields.at("x-custom"), "yes");
  EXPECT_EQ(client.seen[quick].body, "quick");
  EXPECT_EQ(client.seen[slow_id].fields.count(":status"), 0u);  // nothing of it yet
  writer->header("X-Custom", "yes").body("slow");
  ASSERT_TRUE(exchange());
  EXPECT_EQ(client.seen[slow_id].fields.at("x-slow-field"), "first half");
  EXPECT_EQ(client.seen[slow_id].fields.at("x-custom"), "yes");
  EXPECT_EQ(client.seen[slow_id].body, "slow");
  // The tables still agree: the next heads index what the open one added.
  const int32_t after = client.get("/quick");
  ASSERT_TRUE(exchange());
  EXPECT_EQ(client.seen[after].error_code, 0u);
  EXPECT_EQ(client.seen[after].body, "quick");
  EXPECT_EQ(nghttp2_session_want_read(client.session()), 1);  // no compression error ended it
}

TEST_F(OpenHeadTest, AHeadWhoseStreamIsResetIsNeverSentAndTheTablesStartOver) {
  // The heads after the reset would be one place off if the table kept
  // what the unsent head added.
  const int32_t slow_id = open_slow_head_after_a_quick_one();
  ASSERT_NE(slow, nullptr);
  nghttp2_submit_rst_stream(client.session(), NGHTTP2_FLAG_NONE, slow_id, NGHTTP2_CANCEL);
  ASSERT_TRUE(exchange());
  // The stream closed, and its handler was told (the server's exchange
  // stops writing then).
  ASSERT_NE(std::find(closed.begin(), closed.end(), slow_id), closed.end());
  writer.reset();
  for (int i = 0; i < 3; ++i) {
    const int32_t id = client.get("/quick");
    ASSERT_TRUE(exchange());
    EXPECT_EQ(client.seen[id].error_code, 0u);
    EXPECT_EQ(client.seen[id].fields.at("x-custom"), "yes");
    EXPECT_EQ(client.seen[id].body, "quick");
  }
  EXPECT_EQ(client.seen[slow_id].fields.count(":status"), 0u);
  EXPECT_EQ(nghttp2_session_want_read(client.session()), 1);
}

TEST_F(OpenHeadTest, ATableSizeChangeWaitsForTheOpenHead) {
  const int32_t slow_id = client.get("/slow");
  ASSERT_TRUE(exchange());
  ASSERT_NE(slow, nullptr);
  const nghttp2_settings_entry smaller{NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 0};
  ASSERT_EQ(nghttp2_submit_settings(client.session(), NGHTTP2_FLAG_NONE, &smaller, 1), 0);
  const int32_t quick = client.get("/quick");
  ASSERT_TRUE(exchange());
  EXPECT_EQ(client.seen[quick].body, "quick");
  writer->body("slow");
  ASSERT_TRUE(exchange());
  EXPECT_EQ(client.seen[slow_id].fields.at("x-slow-field"), "first half");
  const int32_t after = client.get("/quick");
  ASSERT_TRUE(exchange());
  EXPECT_EQ(client.seen[after].error_code, 0u);
  EXPECT_EQ(client.seen[after].body, "quick");
  EXPECT_EQ(nghttp2_session_want_read(client.session()), 1);
}

TEST_F(SessionTest, HeadAndBodilessStatusesEndWithTheirHeaders) {
  on_request = [&](Stream& stream) {
    if (stream.request().method() == http::Method::kHead) {
      respond(stream, 200, "twelve bytes", /*head_only=*/true);
    } else {
      respond(stream, 204, "");
    }
  };
  const int32_t head = client.request(
      {{":method", "HEAD"}, {":scheme", "https"}, {":authority", "example.test"}, {":path", "/"}});
  const int32_t no_content = client.get("/empty");
  ASSERT_TRUE(exchange());
  EXPECT_EQ(client.seen[head].fields.at(":status"), "200");
  EXPECT_EQ(client.seen[head].fields.at("content-length"), "12");  // announced, not sent
  EXPECT_EQ(client.seen[head].body, "");
  EXPECT_TRUE(client.seen[head].closed);
  EXPECT_EQ(client.seen[no_content].fields.at(":status"), "204");
  EXPECT_EQ(client.seen[no_content].fields.count("content-length"), 0u);
  EXPECT_TRUE(client.seen[no_content].closed);
}

TEST_F(SessionTest, ARequestBodyArrivesWholeAndInOrder) {
  std::string body(300 * 1024, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 7 % 251);
  on_request = [&](Stream& stream) {
    // No content-length: announced as chunked, as HTTP/1 would frame it.
    EXPECT_EQ(stream.request().body_framing(), http::BodyFraming::kChunked);
    EXPECT_FALSE(stream.body_complete());
  };
  on_body = [&](Stream& stream, std::string_view, bool last) {
    if (last) respond(stream, 200, "got it");
  };
  const int32_t id =
      client.request({{":method", "POST"}, {":scheme", "https"}, {":authority", "x"}, {":path", "/up"}}, &body);
  ASSERT_TRUE(exchange());
  EXPECT_TRUE(body_ended[id]);
  EXPECT_TRUE(bodies[id] == body) << "the body differs (" << bodies[id].size() << " bytes)";
  EXPECT_EQ(client.seen[id].body, "got it");
}

// A small body comes in the same read as its head (as curl sends a POST):
// the head still says a body follows, and the body and its end come after.
TEST_F(SessionTest, ABodyInTheSameReadAsItsHeadIsDeliveredAfterIt) {
  std::vector<std::string> events;
  on_request = [&](Stream& stream) {
    events.push_back("head");
    EXPECT_FALSE(stream.body_complete());
    EXPECT_NE(stream.request().body_framing(), http::BodyFraming::kNone);
  };
  on_body = [&](Stream& stream, std::string_view piece, bool last) {
    if (!piece.empty()) events.push_back("body");
    if (last) {
      events.push_back("end");
      respond(stream, 200, "got it");
    }
  };
  std::string small = R"({"username":"alice"})";
  const int32_t chunked =
      client.request({{":method", "POST"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/a"}}, &small);
  const int32_t sized = client.request({{":method", "POST"},
                                        {":scheme", "http"},
                                        {":authority", "x"},
                                        {":path", "/b"},
                                        {"content-length", std::to_string(small.size())}},
                                       &small);
  ASSERT_TRUE(exchange());
  EXPECT_EQ(events, (std::vector<std::string>{"head", "body", "end", "head", "body", "end"}));
  EXPECT_EQ(bodies[chunked], small);
  EXPECT_EQ(bodies[sized], small);
  EXPECT_EQ(client.seen[chunked].body, "got it");
  EXPECT_EQ(client.seen[sized].body, "got it");
}

TEST_F(SessionTest, APausedBodyStopsTheClientAtItsWindow) {
  std::string body(1024 * 1024, 'b');
  Stream* paused = nullptr;
  on_request = [&](Stream& stream) {
    stream.pause_body();
    paused = &stream;
  };
  const int32_t id = client.request(
      {{":method", "PUT"}, {":scheme", "https"}, {":authority", "x"}, {":path", "/"}, {"content-length", "1048576"}},
      &body);
  ASSERT_TRUE(exchange());
  ASSERT_NE(paused, nullptr);
  // Nothing delivered, and the client stopped after the stream's window.
  EXPECT_EQ(bodies[id].size(), 0u);
  EXPECT_LE(paused->held_bytes(), limits.stream_window);
  EXPECT_GT(paused->held_bytes(), 0u);
  on_body = [&](Stream& stream, std::string_view, bool last) {
    if (last) respond(stream, 200, "done");
  };
  paused->resume_body();
  ASSERT_TRUE(exchange());
  EXPECT_EQ(bodies[id].size(), body.size());
  EXPECT_TRUE(body_ended[id]);
  EXPECT_EQ(client.seen[id].body, "done");
}

TEST_F(SessionTest, ALargeResponseGoesAsTheClientsWindowsAllow) {
  // 4 MiB: well past the 64 KiB windows the client starts with; its
  // WINDOW_UPDATEs let the rest through.
  std::string big(4 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i % 253);
  on_request = [&](Stream& stream) { respond(stream, 200, big); };
  const int32_t id = client.get("/big");
  ASSERT_TRUE(exchange());
  EXPECT_EQ(client.seen[id].fields.at("content-length"), std::to_string(big.size()));
  EXPECT_TRUE(client.seen[id].body == big) << client.seen[id].body.size() << " bytes arrived";
}

// A file of `size` bytes in `dir` (byte i is i % modulus), opened into
// *fd: its content.
std::string patterned_file(const tern::testing::TempDir& dir, size_t size, int modulus, int* fd) {
  std::string content(size, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i % modulus);
  EXPECT_TRUE(dir.write("f.bin", content));
  *fd = ::open((dir.path() + "/f.bin").c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(*fd, 0);
  return content;
}

// `status`, with `length` bytes of `fd` from `offset` as the body.
void respond_with_file(Stream& stream, int status, int fd, size_t offset, size_t length) {
  http::ResponseWriter::Context context;
  context.stream = &stream;
  http::ResponseWriter writer(context);
  net::FileRegion region;
  region.fd = fd;
  region.offset = static_cast<off_t>(offset);
  region.length = length;
  writer.start(status).file(std::move(region));
}

TEST_F(SessionTest, AFileRegionIsReadIntoDataFrames) {
  tern::testing::TempDir dir;
  int fd = -1;
  const std::string content = patterned_file(dir, 200 * 1024, 241, &fd);
  ASSERT_GE(fd, 0);
  // The middle of the file, as a range would send it.
  on_request = [&](Stream& stream) { respond_with_file(stream, 206, fd, 1000, 150000); };
  const int32_t id = client.get("/f.bin");
  ASSERT_TRUE(exchange());
  ::close(fd);
  EXPECT_EQ(client.seen[id].fields.at(":status"), "206");
  EXPECT_TRUE(client.seen[id].body == content.substr(1000, 150000));
}

// The read system calls this process has made (reads, preads and preadv
// alike), from /proc/self/io.
uint64_t read_calls() {
  std::ifstream io("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (io >> key >> value) {
    if (key == "syscr:") return value;
  }
  return 0;
}

TEST_F(SessionTest, AFileAloneOnItsConnectionIsReadAStepAtATime) {
  // One preadv fills the frames of a step, not a pread each: 256 KiB in
  // steps of 64 KiB is five or six reads, not sixteen.
  tern::testing::TempDir dir;
  int fd = -1;
  const std::string content = patterned_file(dir, 256 * 1024, 233, &fd);
  ASSERT_GE(fd, 0);
  on_request = [&](Stream& stream) { respond_with_file(stream, 200, fd, 0, content.size()); };
  // Windows as wide as the file, so that they are not what cuts a step.
  const nghttp2_settings_entry window{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20};
  ASSERT_EQ(nghttp2_submit_settings(client.session(), NGHTTP2_FLAG_NONE, &window, 1), 0);
  const int32_t id = client.get("/f.bin");
  ASSERT_EQ(nghttp2_submit_window_update(client.session(), NGHTTP2_FLAG_NONE, 0, 1 << 20), 0);
  ASSERT_TRUE(session_->receive(client.output()));
  const uint64_t before = read_calls();
  size_t steps = 0;
  for (; steps < 100 && session_->wants_to_send(); ++steps) {
    net::Buffer out;
    session_->send(out, 64 * 1024);
    client.input(out.view());
    ASSERT_TRUE(session_->receive(client.output()));
  }
  const uint64_t reads = read_calls() - before;
  ::close(fd);
  EXPECT_TRUE(client.seen[id].closed);
  EXPECT_EQ(client.seen[id].error_code, 0u);
  EXPECT_TRUE(client.seen[id].body == content) << "the file's bytes, in order";
  // A read a step, and one for the few bytes a step may leave over (made
  // a frame of their own by the next call): 16 frames before.
  EXPECT_LE(reads, steps + 1) << "a read a frame, not a step";
  EXPECT_GE(reads, 4u);
}

TEST_F(SessionTest, AFileCutShortResetsItsStreamAndTheOthersGoOn) {
  // The file shrinks after its region was queued (a site being updated):
  // what was framed is the file's own bytes, then RST_STREAM
  // INTERNAL_ERROR; no frame of made-up bytes, and the connection serves on.
  tern::testing::TempDir dir;
  int fd = -1;
  const std::string content = patterned_file(dir, 200 * 1024, 239, &fd);
  ASSERT_GE(fd, 0);
  on_request = [&](Stream& stream) {
    if (stream.request().path() != "/f.bin") return respond(stream, 200, "other");
    respond_with_file(stream, 200, fd, 0, content.size());
    ASSERT_EQ(::truncate((dir.path() + "/f.bin").c_str(), 40000), 0);
  };
  const int32_t cut = client.get("/f.bin");
  ASSERT_TRUE(exchange());
  const int32_t other = client.get("/other");
  ASSERT_TRUE(exchange());
  ::close(fd);
  const H2Response& seen = client.seen[cut];
  EXPECT_TRUE(seen.closed);
  EXPECT_EQ(seen.error_code, static_cast<uint32_t>(NGHTTP2_INTERNAL_ERROR));
  EXPECT_LE(seen.body.size(), 40000u);
  EXPECT_TRUE(seen.body == content.substr(0, seen.body.size())) << "bytes that are not the file's";
  EXPECT_EQ(client.seen[other].body, "other");
  EXPECT_EQ(client.seen[other].error_code, 0u);
}

TEST_F(SessionTest, SendStopsNearItsBudgetAndTheNextCallsGoOn) {
  // A call makes about `budget` bytes (a frame more at most), so a
  // connection's output stays bounded whatever the client's windows allow.
  const std::string big(1 << 20, 'b');
  on_request = [&](Stream& stream) { respond(stream, 200, big); };
  const int32_t id = client.get("/big");
  ASSERT_TRUE(session_->receive(client.output()));
  constexpr size_t kBudget = 20000;
  constexpr size_t kMaxFrame = 9 + 16384;
  size_t calls = 0;
  for (; calls < 1000 && session_->wants_to_send(); ++calls) {
    net::Buffer out;
    session_->send(out, kBudget);
    EXPECT_LE(out.readable_bytes(), kBudget + kMaxFrame);
    client.input(out.view());
    const std::string to_server = client.output();  // WINDOW_UPDATEs
    if (!to_server.empty()) {
      ASSERT_TRUE(session_->receive(to_server));
    }
  }
  EXPECT_GT(calls, big.size() / (kBudget + kMaxFrame));
  EXPECT_TRUE(client.seen[id].closed);
  EXPECT_TRUE(client.seen[id].body == big) << client.seen[id].body.size() << " bytes arrived";
}

// A budget of one TLS record's plaintext (what Http2Connection gives a
// step) makes one DATA frame that fills it, its header included: the
// record layer then cuts no 9-byte record off each frame.
// A step's frames go into room made for them at once: grown a frame at a
// time, the connection's buffer would be copied at each doubling (and end
// at twice the step).
TEST_F(SessionTest, AStepOfABodyIsMadeInRoomReservedAtOnce) {
  const std::string big(1 << 20, 'b');
  on_request = [&](Stream& stream) { respond(stream, 200, big); };
  const int32_t id = client.get("/big");
  ASSERT_TRUE(session_->receive(client.output()));
  net::Buffer settings;
  session_->send(settings, 1024);  // the SETTINGS and the head
  client.input(settings.view());
  ASSERT_TRUE(session_->receive(client.output()));
  constexpr size_t kStep = 64 * 1024;
  // Grown a frame at a time from here it would end at 80,000 bytes.
  net::Buffer out(20000);
  session_->send(out, kStep);
  EXPECT_GT(out.readable_bytes(), kStep - 9 - 16384);
  EXPECT_LE(out.capacity(), kStep + 1024);
  client.input(out.view());
  EXPECT_GT(client.seen[id].body.size(), kStep - 2 * 16384);
}

TEST_F(SessionTest, ADataFrameFitsItsBudgetHeaderIncluded) {
  const std::string big(200 * 1024, 'r');
  on_request = [&](Stream& stream) { respond(stream, 200, big); };
  client.get("/big");
  ASSERT_TRUE(session_->receive(client.output()));
  net::Buffer head;
  session_->send(head, 0);  // SETTINGS, the response's HEADERS
  client.input(head.view());
  constexpr size_t kRecord = 16384;
  for (int i = 0; i < 3; ++i) {
    net::Buffer out;
    session_->send(out, kRecord);
    EXPECT_EQ(out.readable_bytes(), kRecord) << "step " << i;
    client.input(out.view());
  }
}

TEST_F(SessionTest, AStreamedBodyWaitsForItsProducerAndTellsItWhenDrained) {
  int drained = 0;
  Stream* open = nullptr;
  on_request = [&](Stream& stream) {
    open = &stream;
    stream.start_head(200, {}, {});
    stream.end_head({.kind = http::ResponseFraming::Kind::kStream});
    stream.data(std::string(100 * 1024, 's'));  // above the high water
    EXPECT_GE(stream.pending_output_bytes(), limits.stream_high_water);
  };
  on_drained = [&](Stream&) { ++drained; };
  const int32_t id = client.get("/stream");
  ASSERT_TRUE(exchange());
  EXPECT_EQ(drained, 1);
  EXPECT_FALSE(client.seen[id].closed);  // no end yet: the stream waits
  EXPECT_EQ(client.seen[id].body.size(), 100u * 1024);
  open->data("tail");
  open->end();
  ASSERT_TRUE(exchange());
  EXPECT_TRUE(client.seen[id].closed);
  EXPECT_EQ(client.seen[id].body.size(), 100u * 1024 + 4);
}

TEST_F(SessionTest, ManyStreamsAtOnceAreEachAnswered) {
  on_request = [&](Stream& stream) { respond(stream, 200, std::string(stream.request().path())); };
  std::vector<int32_t> ids;
  for (int i = 0; i < 100; ++i) ids.push_back(client.get("/s" + std::to_string(i)));
  ASSERT_TRUE(exchange());
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(client.seen[ids[i]].body, "/s" + std::to_string(i));
    EXPECT_TRUE(client.seen[ids[i]].closed);
  }
  EXPECT_EQ(closed.size(), 100u);
  EXPECT_EQ(session_->open_streams(), 0u);
}

// The sessions of a loop share the streams they closed: one that a session
// closed (and that session gone) serves another session's request as that
// session's own, its request and head made new; no more than
// StreamSpares::kStreams wait.
TEST_F(SessionTest, TheStreamsASessionClosedServeTheNextSessionOfItsLoop) {
  spares = std::make_shared<StreamSpares>();
  make();
  on_request = [&](Stream& stream) { respond(stream, 200, std::string(stream.request().path())); };
  for (int i = 0; i < 100; ++i) client.request({{":method", "GET"}, {":scheme", "https"}, {":authority", "a.test"},
                                                {":path", "/first/" + std::to_string(i)}, {"x-first", "1"}});
  ASSERT_TRUE(exchange());
  ASSERT_EQ(spares->streams.size(), StreamSpares::kStreams);
  const Stream* next = spares->streams.back().get();
  session_.reset();

  Session::Callbacks callbacks;
  std::vector<const Stream*> served;
  callbacks.on_request = [&](Stream& stream) {
    served.push_back(&stream);
    EXPECT_EQ(stream.request().header("x-first"), "");
    EXPECT_EQ(stream.request().host(), "b.test");
    respond(stream, 200, std::string(stream.request().path()));
  };
  callbacks.on_body = [](Stream&, std::string_view, bool) {};
  callbacks.on_drained = [](Stream&) {};
  callbacks.on_close = [](Stream&) {};
  Session second(limits, std::move(callbacks), spares);
  H2Client second_client;
  const int32_t id = second_client.request({{":method", "GET"}, {":scheme", "https"}, {":authority", "b.test"},
                                            {":path", "/second"}});
  ASSERT_TRUE(exchange(second_client, second));
  ASSERT_EQ(served.size(), 1u);
  EXPECT_EQ(served[0], next);
  EXPECT_EQ(second_client.seen[id].fields.at(":status"), "200");
  EXPECT_EQ(second_client.seen[id].body, "/second");
  EXPECT_TRUE(second_client.seen[id].closed);
  EXPECT_EQ(spares->streams.size(), StreamSpares::kStreams);
}

TEST_F(SessionTest, AHeadTheParserRefusesIsAnsweredWithItsStatusAndNeverSeen) {
  limits.parser.max_headers = 10;
  make();
  // A target longer than HTTP/1 allows: 414.
  const int32_t bad = client.request(
      {{":method", "GET"}, {":scheme", "https"}, {":authority", "x"}, {":path", "/" + std::string(9000, 'p')}});
  // More fields than the parser takes: 431.
  std::vector<std::pair<std::string, std::string>> fields = {
      {":method", "GET"}, {":scheme", "https"}, {":authority", "x"}, {":path", "/"}};
  for (int i = 0; i < 11; ++i) fields.emplace_back("x-field-" + std::to_string(i), "v");
  const int32_t many = client.request(fields);
  ASSERT_TRUE(exchange());
  EXPECT_TRUE(requests.empty());
  EXPECT_EQ(client.seen[bad].fields.at(":status"), "414");
  EXPECT_EQ(client.seen[many].fields.at(":status"), "431");
  EXPECT_TRUE(closed.empty());  // the handlers never had them
  EXPECT_EQ(client.goaway_code, -1);
}

TEST_F(SessionTest, AHeadThatDecodesPastTheLimitEndsTheConnectionHoweverSmallOnTheWire) {
  // An HPACK bomb: one 1,000-byte field, then the same field 40 times more,
  // each a one-byte reference to the dynamic table.
  std::vector<std::pair<std::string, std::string>> fields = {
      {":method", "GET"}, {":scheme", "https"}, {":authority", "x"}, {":path", "/"}};
  for (int i = 0; i < 41; ++i) fields.emplace_back("x-same", std::string(1000, 'v'));
  ASSERT_TRUE(exchange());  // the settings, both ways
  client.request(fields);
  nghttp2_submit_ping(client.session(), NGHTTP2_FLAG_NONE, nullptr);
  const std::string wire = client.output();
  EXPECT_LT(wire.size(), 2000u) << "the client did not compress the copies";
  // Decoding stops at the limit: the PING behind the block is not read.
  EXPECT_FALSE(session_->receive(wire));
  exchange();
  EXPECT_TRUE(requests.empty());
  EXPECT_EQ(client.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
  EXPECT_EQ(client.pings_acked, 0);
  EXPECT_NE(session_->error().find("head limit"), std::string_view::npos);
  EXPECT_TRUE(session_->done());
}

TEST_F(SessionTest, AFieldHttp2ForbidsResetsTheStream) {
  const int32_t id = client.request(
      {{":method", "GET"}, {":scheme", "https"}, {":authority", "x"}, {":path", "/"}, {"connection", "close"}});
  ASSERT_TRUE(exchange());
  EXPECT_TRUE(requests.empty());
  EXPECT_TRUE(client.seen[id].closed);
  EXPECT_EQ(client.seen[id].error_code, static_cast<uint32_t>(NGHTTP2_PROTOCOL_ERROR));
}

TEST_F(SessionTest, BytesThatAreNotHttp2EndTheConnection) {
  EXPECT_FALSE(session_->receive("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_FALSE(session_->error().empty());
}

TEST_F(SessionTest, ShutdownLetsTheStreamsInProgressFinish) {
  Stream* open = nullptr;
  on_request = [&](Stream& stream) { open = &stream; };
  const int32_t id = client.get("/slow");
  ASSERT_TRUE(exchange());
  ASSERT_NE(open, nullptr);
  session_->shutdown();
  ASSERT_TRUE(exchange());
  EXPECT_FALSE(session_->done());  // the stream is still answering
  respond(*open, 200, "late");
  ASSERT_TRUE(exchange());
  EXPECT_EQ(client.seen[id].body, "late");
  EXPECT_TRUE(session_->done());
}

// Frames by hand, for what nghttp2's client will not send.
std::string frame(uint8_t type, uint8_t flags, uint32_t stream_id, std::string_view payload = {}) {
  std::string out;
  const auto length = static_cast<uint32_t>(payload.size());
  out += {static_cast<char>(length >> 16), static_cast<char>(length >> 8), static_cast<char>(length),
          static_cast<char>(type), static_cast<char>(flags), static_cast<char>(stream_id >> 24),
          static_cast<char>(stream_id >> 16), static_cast<char>(stream_id >> 8), static_cast<char>(stream_id)};
  return out.append(payload);
}

// An HPACK literal without indexing (names and values under 127 bytes).
std::string literal(std::string_view name, std::string_view value) {
  std::string out(1, '\0');
  out += static_cast<char>(name.size());
  out.append(name);
  out += static_cast<char>(value.size());
  return out.append(value);
}

std::string get_block(std::string_view path) {
  return literal(":method", "GET") + literal(":scheme", "http") + literal(":path", path) +
         literal(":authority", "x");
}

const std::string kPreface = std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + frame(NGHTTP2_SETTINGS, 0, 0);

// The error code of the first GOAWAY among `bytes` (frames), or -1.
int64_t goaway_code(std::string_view bytes) {
  while (bytes.size() >= 9) {
    const size_t length = (static_cast<uint8_t>(bytes[0]) << 16) | (static_cast<uint8_t>(bytes[1]) << 8) |
                          static_cast<uint8_t>(bytes[2]);
    if (bytes.size() < 9 + length) break;
    if (bytes[3] == NGHTTP2_GOAWAY && length >= 8) {
      uint32_t code = 0;
      for (int i = 4; i < 8; ++i) code = code << 8 | static_cast<uint8_t>(bytes[9 + i]);
      return code;
    }
    bytes.remove_prefix(9 + length);
  }
  return -1;
}

// Everything the session has to send.
std::string drain(Session& session) {
  net::Buffer out;
  session.send(out);
  return std::string(out.view());
}

TEST_F(SessionTest, AFloodOfControlFramesEndsWithEnhanceYourCalm) {
  limits.control_burst = 50;
  limits.control_rate = 1;
  make();
  const int32_t id = client.get("/");
  for (int i = 0; i < 40; ++i) nghttp2_submit_ping(client.session(), NGHTTP2_FLAG_NONE, nullptr);
  ASSERT_TRUE(exchange());  // within the burst: answered
  EXPECT_EQ(requests.size(), 1u);
  EXPECT_EQ(client.goaway_code, -1);
  for (int i = 0; i < 40; ++i) nghttp2_submit_ping(client.session(), NGHTTP2_FLAG_NONE, nullptr);
  exchange();
  EXPECT_EQ(client.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
  EXPECT_NE(session_->error().find("flood"), std::string_view::npos);
  EXPECT_TRUE(session_->done());
  (void)id;
}

TEST_F(SessionTest, RapidResetIsCountedAsAFlood) {
  limits.control_burst = 100;
  make();
  std::string bytes = kPreface;
  for (uint32_t id = 1; id < 2 * 150; id += 2) {
    bytes += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, id, get_block("/"));
    bytes += frame(NGHTTP2_RST_STREAM, 0, id, std::string("\0\0\0\x08", 4));
  }
  session_->receive(bytes);
  EXPECT_EQ(goaway_code(drain(*session_)), NGHTTP2_ENHANCE_YOUR_CALM);
  EXPECT_LT(requests.size(), 110u);  // the handlers stopped seeing them at the limit
}

TEST_F(SessionTest, AContinuationFloodEndsTheConnection) {
  std::string bytes = kPreface + frame(NGHTTP2_HEADERS, 0, 1, get_block("/"));
  for (int i = 0; i < 20; ++i) bytes += frame(NGHTTP2_CONTINUATION, 0, 1, literal("x-filler", "yyyy"));
  EXPECT_FALSE(session_->receive(bytes));
  EXPECT_EQ(goaway_code(drain(*session_)), NGHTTP2_ENHANCE_YOUR_CALM);
  EXPECT_TRUE(session_->done());
  EXPECT_FALSE(session_->receive(frame(NGHTTP2_PING, 0, 0, "12345678")));  // and nothing after it
  EXPECT_EQ(drain(*session_), "");
}

// An HPACK literal with incremental indexing, new name (RFC 7541 6.2.1):
// it enters the dynamic table, where index 62 then names it.
std::string indexed_literal(std::string_view name, std::string_view value) {
  std::string out(1, '\x40');
  out += static_cast<char>(name.size());
  out.append(name);
  // The value's length as a 7-bit prefix integer (RFC 7541 5.1).
  size_t length = value.size();
  if (length < 127) {
    out += static_cast<char>(length);
  } else {
    out += '\x7f';
    for (length -= 127; length >= 128; length /= 128) out += static_cast<char>(length % 128 + 128);
    out += static_cast<char>(length);
  }
  return out.append(value);
}

TEST_F(SessionTest, TrailersThatDecodePastTheLimitEndTheConnection) {
  on_request = [](Stream&) {};  // waits for the body
  const std::string head = literal(":method", "POST") + literal(":scheme", "http") + literal(":path", "/") +
                           literal(":authority", "x");
  ASSERT_TRUE(session_->receive(kPreface + frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1, head) +
                                frame(NGHTTP2_DATA, 0, 1, "abc")));
  EXPECT_EQ(requests.size(), 1u);
  // One 1,000-byte field, then 40 one-byte references to it.
  const std::string trailers = indexed_literal("x-trailer", std::string(1000, 't')) + std::string(40, '\xbe');
  EXPECT_FALSE(session_->receive(
      frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, 1, trailers)));
  EXPECT_EQ(goaway_code(drain(*session_)), NGHTTP2_ENHANCE_YOUR_CALM);
  EXPECT_NE(session_->error().find("head limit"), std::string_view::npos);
}

TEST_F(SessionTest, AHeaderBlockLargerThanTheLimitOnTheWireEndsTheConnectionUndecoded) {
  // One stream at a time: the second is refused, and nghttp2 would decode
  // its block (for its table) with no on_header to stop it.
  limits.max_concurrent_streams = 1;
  limits.parser.max_head_bytes = 4096;
  make();
  on_request = [](Stream&) {};  // left open
  std::string bytes = kPreface + frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1, get_block("/"));
  ASSERT_TRUE(session_->receive(bytes));
  EXPECT_EQ(requests.size(), 1u);
  std::string block = get_block("/");
  while (block.size() < 6000) block += literal("x-filler", std::string(100, 'f'));
  bytes = frame(NGHTTP2_HEADERS, 0, 3, block.substr(0, 3000)) +
          frame(NGHTTP2_CONTINUATION, NGHTTP2_FLAG_END_HEADERS, 3, block.substr(3000));
  EXPECT_FALSE(session_->receive(bytes + frame(NGHTTP2_PING, 0, 0, "12345678")));
  const std::string out = drain(*session_);
  EXPECT_EQ(goaway_code(out), NGHTTP2_ENHANCE_YOUR_CALM);
  EXPECT_NE(session_->error().find("header block larger"), std::string_view::npos);
}

TEST_F(SessionTest, NotHttp2IsAProtocolErrorGoaway) {
  EXPECT_FALSE(session_->receive("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(goaway_code(drain(*session_)), NGHTTP2_PROTOCOL_ERROR);
}

TEST_F(SessionTest, HeadersOnAPassedOverStreamIdAreAProtocolError) {
  on_request = [](Stream& stream) { respond(stream, 200, "ok"); };
  std::string bytes = kPreface + frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, 5,
                                       get_block("/five"));
  ASSERT_TRUE(session_->receive(bytes));
  const std::string answered = drain(*session_);  // stream 5 is answered and closed
  EXPECT_EQ(goaway_code(answered), -1);
  session_->receive(frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, 3, get_block("/3")));
  EXPECT_EQ(goaway_code(drain(*session_)), NGHTTP2_PROTOCOL_ERROR);
  EXPECT_EQ(requests.size(), 1u);
}

// The RST_STREAM error code for `stream_id` among `bytes` (frames), or -1.
int64_t reset_code(std::string_view bytes, uint32_t stream_id) {
  while (bytes.size() >= 9) {
    const size_t length = (static_cast<uint8_t>(bytes[0]) << 16) | (static_cast<uint8_t>(bytes[1]) << 8) |
                          static_cast<uint8_t>(bytes[2]);
    if (bytes.size() < 9 + length) break;
    uint32_t id = 0;
    for (int i = 5; i < 9; ++i) id = id << 8 | static_cast<uint8_t>(bytes[i]);
    if (bytes[3] == NGHTTP2_RST_STREAM && (id & 0x7fffffff) == stream_id && length == 4) {
      uint32_t code = 0;
      for (int i = 9; i < 13; ++i) code = code << 8 | static_cast<uint8_t>(bytes[i]);
      return code;
    }
    bytes.remove_prefix(9 + length);
  }
  return -1;
}

TEST_F(SessionTest, StreamsPastTheLimitAreRefusedOrEndTheConnection) {
  limits.max_concurrent_streams = 2;
  make();
  Stream* first = nullptr;
  on_request = [&](Stream& stream) {
    if (first == nullptr) first = &stream;  // left unanswered: it stays open
  };
  std::string three;
  for (uint32_t id = 1; id <= 5; id += 2) {
    three += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, id, get_block("/"));
  }
  // Before the client acknowledged the limit, a stream past it is refused
  // and the connection goes on.
  ASSERT_TRUE(session_->receive(kPreface + three));
  std::string out = drain(*session_);
  EXPECT_EQ(reset_code(out, 5), NGHTTP2_REFUSED_STREAM);
  EXPECT_EQ(goaway_code(out), -1);
  EXPECT_EQ(requests.size(), 2u);
  ASSERT_NE(first, nullptr);
  respond(*first, 200, "one");
  EXPECT_NE(drain(*session_), "");
  // Once it has, going past it is a protocol error.
  std::string more = frame(NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0);
  for (uint32_t id = 7; id <= 11; id += 2) {
    more += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, id, get_block("/"));
  }
  session_->receive(more);
  EXPECT_EQ(goaway_code(drain(*session_)), NGHTTP2_PROTOCOL_ERROR);
}

TEST_F(SessionTest, APingIsAnswered) {
  nghttp2_submit_ping(client.session(), NGHTTP2_FLAG_NONE, nullptr);
  ASSERT_TRUE(exchange());
  EXPECT_EQ(client.pings_acked, 1);
}

TEST_F(SessionTest, TheClientsSettingsBeforeItsFirstRequestHold) {
  // The client's settings, a PING, its acknowledgement of ours: all
  // answered, with no stream yet.
  const nghttp2_settings_entry closed_window{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 0};
  nghttp2_submit_settings(client.session(), NGHTTP2_FLAG_NONE, &closed_window, 1);
  nghttp2_submit_ping(client.session(), NGHTTP2_FLAG_NONE, nullptr);
  ASSERT_TRUE(exchange());
  EXPECT_EQ(client.pings_acked, 1);
  EXPECT_EQ(client.goaway_code, -1);
  EXPECT_FALSE(session_->wants_to_send());
  // What was answered before counts: the client gave its streams no
  // window, so the body waits.
  on_request = [](Stream& stream) { respond(stream, 200, "held back"); };
  const int32_t id = client.get("/a");
  ASSERT_TRUE(exchange());
  EXPECT_EQ(client.seen[id].fields.at(":status"), "200");
  EXPECT_EQ(client.seen[id].body, "");
  EXPECT_EQ(session_->queued_bytes(), 9u);
  // Opened, it comes.
  nghttp2_submit_window_update(client.session(), NGHTTP2_FLAG_NONE, id, 100);
  ASSERT_TRUE(exchange());
  EXPECT_EQ(client.seen[id].body, "held back");
  EXPECT_EQ(client.pings_acked, 1);
}

TEST_F(SessionTest, ARequestInTheFirstBytesIsAnsweredWithTheRest) {
  on_request = [](Stream& stream) { respond(stream, 200, "at once"); };
  const int32_t id = client.get("/a");
  nghttp2_submit_ping(client.session(), NGHTTP2_FLAG_NONE, nullptr);
  ASSERT_TRUE(exchange());
  EXPECT_EQ(client.seen[id].body, "at once");
  EXPECT_EQ(client.pings_acked, 1);
}

TEST_F(SessionTest, ShutdownBeforeAnyStreamSaysGoawayWithNoneTaken) {
  ASSERT_TRUE(exchange());
  session_->shutdown();
  EXPECT_TRUE(session_->wants_to_send());
  ASSERT_TRUE(exchange());
  EXPECT_EQ(client.goaway_code, NGHTTP2_NO_ERROR);
  EXPECT_TRUE(session_->done());
}

TEST_F(SessionTest, APingFloodBeforeAnyStreamEndsWithEnhanceYourCalm) {
  limits.control_burst = 20;
  limits.control_rate = 1;
  make();
  for (int i = 0; i < 40; ++i) nghttp2_submit_ping(client.session(), NGHTTP2_FLAG_NONE, nullptr);
  exchange();
  EXPECT_EQ(client.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
  EXPECT_TRUE(session_->done());
}

TEST_F(SessionTest, ASettingsAckWithAPayloadIsAFrameSizeError) {
  ASSERT_TRUE(session_->receive(kPreface + frame(NGHTTP2_SETTINGS, 0, 0)));
  EXPECT_NE(drain(*session_), "");  // our settings, and the ack of the client's
  // SETTINGS acknowledged with a payload: a FRAME_SIZE_ERROR (RFC 9113 6.5).
  session_->receive(frame(NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0, "123456"));
  EXPECT_EQ(goaway_code(drain(*session_)), NGHTTP2_FRAME_SIZE_ERROR);
}

TEST_F(SessionTest, ResponseAndBodyBytesAreCounted) {
  on_request = [](Stream& stream) { respond(stream, 200, std::string(5000, 'x')); };
  const std::string body(3000, 'b');
  client.request({{":method", "POST"}, {":scheme", "https"}, {":authority", "x"}, {":path", "/"}}, &body);
  ASSERT_TRUE(exchange());
  EXPECT_EQ(session_->data_sent(), 5000u);
  EXPECT_EQ(session_->data_received(), 3000u);
  EXPECT_EQ(session_->queued_bytes(), 0u);
}

}  // namespace
}  // namespace tern::http2
