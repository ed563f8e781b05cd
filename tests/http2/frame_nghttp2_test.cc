// The frame layer against nghttp2, both ways. What our writer writes,
// nghttp2's server session takes without complaint and sees with the values
// we wrote (its on_frame_recv, on_header and on_data_chunk_recv callbacks);
// what nghttp2's client session writes (padded, with priorities and
// CONTINUATION frames), our reader reads to the values nghttp2 was given.
#include "http2/frame_writer.h"

#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "frame_test_support.h"
#include "http2/frame_reader.h"
#include "support/h2_client.h"

namespace tern::http2 {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

using tern::testing::to_nv;

Fields big_request(const char* method) {
  Fields f = {{":method", method}, {":scheme", "https"}, {":authority", "example.com"}, {":path", "/up"}};
  uint32_t x = 1;
  for (int i = 0; i < 10; ++i) {
    std::string value(4000, '\0');
    for (char& c : value) {
      x = x * 1103515245u + 12345u;
      c = static_cast<char>('!' + (x >> 16) % 94);
    }
    f.emplace_back("x-big-" + std::to_string(i), value);
  }
  return f;
}

const Fields kSmallRequest = {{":method", "GET"}, {":scheme", "https"}, {":authority", "a"}, {":path", "/"}};

std::string deflate(nghttp2_hd_deflater* deflater, const Fields& fields) {
  std::vector<nghttp2_nv> nv = to_nv(fields);
  std::string block(nghttp2_hd_deflate_bound(deflater, nv.data(), nv.size()), '\0');
  const ssize_t n = nghttp2_hd_deflate_hd(deflater, reinterpret_cast<uint8_t*>(block.data()), block.size(),
                                          nv.data(), nv.size());
  EXPECT_GT(n, 0);
  block.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return block;
}

Fields inflate(nghttp2_hd_inflater* inflater, std::string_view block) {
  Fields fields;
  auto* in = reinterpret_cast<uint8_t*>(const_cast<char*>(block.data()));
  size_t left = block.size();
  for (;;) {
    nghttp2_nv nv;
    int flags = 0;
    const ssize_t n = nghttp2_hd_inflate_hd2(inflater, &nv, &flags, in, left, 1);
    if (n < 0) {
      ADD_FAILURE() << "inflate: " << n;
      return fields;
    }
    in += n;
    left -= static_cast<size_t>(n);
    if (flags & NGHTTP2_HD_INFLATE_EMIT)
      fields.emplace_back(std::string(reinterpret_cast<char*>(nv.name), nv.namelen),
                          std::string(reinterpret_cast<char*>(nv.value), nv.valuelen));
    if (flags & NGHTTP2_HD_INFLATE_FINAL) break;
  }
  nghttp2_hd_inflate_end_headers(inflater);
  return fields;
}

// What nghttp2's server session saw.
struct Seen {
  std::vector<std::string> frames;  // on_frame_recv, one line each
  std::vector<std::string> begun;   // on_begin_frame: "type stream length flags"
  std::map<int32_t, Fields> fields;
  std::map<int32_t, std::string> data;
  int invalid = 0;
};

std::string describe(const nghttp2_frame* f) {
  const nghttp2_frame_hd& hd = f->hd;
  std::string s = std::to_string(hd.type) + " " + std::to_string(hd.stream_id) + " flags=" + std::to_string(hd.flags);
  switch (hd.type) {
    case NGHTTP2_SETTINGS:
      for (size_t i = 0; i < f->settings.niv; ++i)
        s += " " + std::to_string(f->settings.iv[i].settings_id) + ":" + std::to_string(f->settings.iv[i].value);
      break;
    case NGHTTP2_PING:
      s += " " + std::string(reinterpret_cast<const char*>(f->ping.opaque_data), 8);
      break;
    case NGHTTP2_WINDOW_UPDATE:
      s += " +" + std::to_string(f->window_update.window_size_increment);
      break;
    case NGHTTP2_RST_STREAM:
      s += " code=" + std::to_string(f->rst_stream.error_code);
      break;
    case NGHTTP2_PRIORITY:
      s += " dep=" + std::to_string(f->priority.pri_spec.stream_id) + " w=" +
           std::to_string(f->priority.pri_spec.weight) + " ex=" + std::to_string(f->priority.pri_spec.exclusive);
      break;
    case NGHTTP2_GOAWAY:
      s += " last=" + std::to_string(f->goaway.last_stream_id) + " code=" + std::to_string(f->goaway.error_code) +
           " '" + std::string(reinterpret_cast<const char*>(f->goaway.opaque_data), f->goaway.opaque_data_len) + "'";
      break;
    case NGHTTP2_DATA:
      s += " length=" + std::to_string(hd.length);
      break;
    default:
      break;
  }
  return s;
}

nghttp2_session_callbacks* server_callbacks() {
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, [](nghttp2_session*, const nghttp2_frame* f, void* u) {
    static_cast<Seen*>(u)->frames.push_back(describe(f));
    return 0;
  });
  nghttp2_session_callbacks_set_on_begin_frame_callback(cb, [](nghttp2_session*, const nghttp2_frame_hd* hd, void* u) {
    static_cast<Seen*>(u)->begun.push_back(std::to_string(hd->type) + " " + std::to_string(hd->stream_id) + " " +
                                           std::to_string(hd->length) + " " + std::to_string(hd->flags));
    return 0;
  });
  nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(
      cb, [](nghttp2_session*, const nghttp2_frame*, int, void* u) {
        ++static_cast<Seen*>(u)->invalid;
        return 0;
      });
  nghttp2_session_callbacks_set_on_header_callback(
      cb, [](nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t namelen, const uint8_t* value,
             size_t valuelen, uint8_t, void* u) {
        static_cast<Seen*>(u)->fields[f->hd.stream_id].emplace_back(
            std::string(reinterpret_cast<const char*>(name), namelen),
            std::string(reinterpret_cast<const char*>(value), valuelen));
        return 0;
      });
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
      cb, [](nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data, size_t len, void* u) {
        static_cast<Seen*>(u)->data[stream_id].append(reinterpret_cast<const char*>(data), len);
        return 0;
      });
  return cb;
}

// Everything nghttp2 has to send, as bytes.
std::string drain(nghttp2_session* session) {
  std::string out;
  for (;;) {
    const uint8_t* p = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session, &p);
    EXPECT_GE(n, 0);
    if (n <= 0) return out;
    out.append(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
  }
}

TEST(FrameNghttp2, ServerSessionAcceptsWhatTheWriterWrites) {
  Seen seen;
  nghttp2_session_callbacks* cb = server_callbacks();
  nghttp2_session* server = nullptr;
  ASSERT_EQ(nghttp2_session_server_new(&server, cb, &seen), 0);
  nghttp2_session_callbacks_del(cb);
  // Its own SETTINGS first, so that our ACK acknowledges something.
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100}};
  ASSERT_EQ(nghttp2_submit_settings(server, NGHTTP2_FLAG_NONE, iv, 1), 0);
  const std::string server_greeting = drain(server);

  nghttp2_hd_deflater* deflater = nullptr;
  ASSERT_EQ(nghttp2_hd_deflate_new(&deflater, 4096), 0);
  const Fields post = big_request("POST");
  const std::string big_block = deflate(deflater, post);
  ASSERT_GT(big_block.size(), 2 * kDefaultMaxFrameSize);
  const std::string small_block = deflate(deflater, kSmallRequest);
  nghttp2_hd_deflate_del(deflater);

  net::Buffer out;
  out.append(kClientPreface);
  write_settings(out, {{SettingId::kHeaderTableSize, 8192},
                       {SettingId::kEnablePush, 0},
                       {SettingId::kMaxConcurrentStreams, 50},
                       {SettingId::kInitialWindowSize, 1 << 20},
                       {SettingId::kMaxFrameSize, 1 << 16},
                       {SettingId::kMaxHeaderListSize, 1 << 20}});
  write_settings_ack(out);
  write_ping(out, 0x3132333435363738, false);
  write_window_update(out, 0, 100000);
  write_headers(out, 1, big_block, false, kDefaultMaxFrameSize);
  write_data(out, 1, "hello ", false);
  write_data_header(out, 1, 6, false);
  out.append("world ");
  FrameStart start = begin_frame(out);
  out.append("end");
  end_frame(out, start, FrameType::kData, kFlagEndStream, 1);
  write_window_update(out, 1, 500);
  write_headers(out, 3, small_block, true, kDefaultMaxFrameSize);
  write_rst_stream(out, 3, ErrorCode::kCancel);
  write_priority(out, 5, {0, 32, false});
  write_goaway(out, 0, ErrorCode::kNoError, "done");

  const std::string bytes(out.view());
  EXPECT_EQ(nghttp2_session_mem_recv(server, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
            static_cast<ssize_t>(bytes.size()));
  EXPECT_EQ(seen.invalid, 0);
  const std::vector<std::string> want = {
      "4 0 flags=0 1:8192 2:0 3:50 4:1048576 5:65536 6:1048576",
      "4 0 flags=1",
      "6 0 flags=0 12345678",
      "8 0 flags=0 +100000",
      "1 1 flags=4",  // nghttp2 reports the whole block as one HEADERS
      "0 1 flags=0 length=6",
      "0 1 flags=0 length=6",
      "0 1 flags=1 length=3",
      "8 1 flags=0 +500",
      "1 3 flags=5",
      "3 3 flags=0 code=8",
      "2 5 flags=0 dep=0 w=32 ex=0",
      "7 0 flags=0 last=0 code=0 'done'",
  };
  EXPECT_EQ(seen.frames, want);
  // The block went as HEADERS and two CONTINUATION frames.
  ASSERT_GE(seen.begun.size(), 7u);
  EXPECT_EQ(seen.begun[4], "1 1 16384 0");
  EXPECT_EQ(seen.begun[5], "9 1 16384 0");
  EXPECT_EQ(seen.begun[6], "9 1 " + std::to_string(big_block.size() - 2 * kDefaultMaxFrameSize) + " 4");
  EXPECT_EQ(seen.fields[1], post);
  EXPECT_EQ(seen.fields[3], kSmallRequest);
  EXPECT_EQ(seen.data[1], "hello world end");

  // And what the server answers, read by our reader as a client: its
  // SETTINGS, our SETTINGS acknowledged, our PING echoed; no GOAWAY or
  // RST_STREAM of its own.
  const std::vector<std::string> answer = frame_testing::read_pieces(server_greeting + drain(server), {}, Role::kClient);
  const std::vector<std::string> want_answer = {
      "SETTINGS 0 ack=0 3:100",
      "SETTINGS 0 ack=1",
      "PING 0 ack=1 3544952156018063160",
  };
  EXPECT_EQ(answer, want_answer);
  nghttp2_session_del(server);
}

// nghttp2's client pads every frame it can by this much.
constexpr size_t kPadding = 10;

struct Body {
  std::string bytes;
  size_t sent = 0;
};

TEST(FrameNghttp2, ReaderReadsWhatNghttp2Writes) {
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_select_padding_callback(
      cb, [](nghttp2_session*, const nghttp2_frame* f, size_t max, void*) -> ssize_t {
        return static_cast<ssize_t>(std::min(max, f->hd.length + kPadding));
      });
  nghttp2_session* client = nullptr;
  ASSERT_EQ(nghttp2_session_client_new(&client, cb, nullptr), 0);
  nghttp2_session_callbacks_del(cb);

  const std::vector<nghttp2_settings_entry> iv = {{NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 0},
                                                  {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                                  {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 10},
                                                  {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20},
                                                  {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, 1 << 20},
                                                  {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 1 << 16}};
  ASSERT_EQ(nghttp2_submit_settings(client, NGHTTP2_FLAG_NONE, iv.data(), iv.size()), 0);
  const Fields post = big_request("POST");
  std::vector<nghttp2_nv> post_nv = to_nv(post);
  nghttp2_priority_spec pri;
  nghttp2_priority_spec_init(&pri, 0, 32, 1);
  Body body{"the request body", 0};
  nghttp2_data_provider provider;
  provider.source.ptr = &body;
  provider.read_callback = [](nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                              nghttp2_data_source* source, void*) -> ssize_t {
    auto* b = static_cast<Body*>(source->ptr);
    const size_t n = std::min<size_t>({length, b->bytes.size() - b->sent, 5});  // several DATA frames
    std::memcpy(buf, b->bytes.data() + b->sent, n);
    b->sent += n;
    if (b->sent == b->bytes.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  };
  ASSERT_EQ(nghttp2_submit_request(client, &pri, post_nv.data(), post_nv.size(), &provider, nullptr), 1);
  std::vector<nghttp2_nv> get_nv = to_nv(kSmallRequest);
  ASSERT_EQ(nghttp2_submit_request(client, nullptr, get_nv.data(), get_nv.size(), nullptr, nullptr), 3);
  const uint8_t opaque[8] = {'o', 'p', 'a', 'q', 'u', 'e', '!', '?'};
  ASSERT_EQ(nghttp2_submit_ping(client, NGHTTP2_FLAG_NONE, opaque), 0);
  ASSERT_EQ(nghttp2_submit_window_update(client, NGHTTP2_FLAG_NONE, 0, 70000), 0);
  const std::string bytes = drain(client);
  ASSERT_EQ(nghttp2_submit_rst_stream(client, NGHTTP2_FLAG_NONE, 3, NGHTTP2_CANCEL), 0);
  ASSERT_EQ(nghttp2_submit_window_update(client, NGHTTP2_FLAG_NONE, 1, 1000), 0);
  ASSERT_EQ(nghttp2_submit_goaway(client, NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR,
                                  reinterpret_cast<const uint8_t*>("bye"), 3), 0);
  const std::string more = drain(client);
  nghttp2_session_del(client);

  const std::string all = bytes + more;
  std::string_view in = all;
  ASSERT_EQ(match_preface(in), PrefaceStatus::kMatch);
  in.remove_prefix(kClientPreface.size());

  nghttp2_hd_inflater* inflater = nullptr;
  ASSERT_EQ(nghttp2_hd_inflate_new(&inflater), 0);
  ContinuationCheck sequence;
  std::map<uint32_t, std::string> blocks, data;
  std::map<uint32_t, Fields> fields;
  std::vector<std::string> lines;
  size_t padded = 0, continuations = 0;
  while (!in.empty()) {
    ReadResult r = read_frame(in, kDefaultMaxFrameSize);
    ASSERT_EQ(r.status, ReadStatus::kFrame);
    const Frame& f = r.frame;
    ASSERT_TRUE(sequence.check(f.header).ok());
    if (f.header.has(kFlagPadded) && (f.header.type == FrameType::kData || f.header.type == FrameType::kHeaders))
      ++padded;
    if (f.header.type == FrameType::kHeaders || f.header.type == FrameType::kContinuation) {
      std::string_view block;
      bool end = false;
      if (f.header.type == FrameType::kHeaders) {
        HeadersFrame h;
        ASSERT_TRUE(decode_headers(f, h).ok());
        block = h.block;
        end = h.end_headers;
        std::string line = "HEADERS " + std::to_string(h.stream_id) + " es=" + std::to_string(h.end_stream);
        if (h.has_priority)
          line += " dep=" + std::to_string(h.priority.depends_on) + " w=" + std::to_string(h.priority.weight) +
                  " ex=" + std::to_string(h.priority.exclusive);
        lines.push_back(line);
      } else {
        ContinuationFrame c;
        ASSERT_TRUE(decode_continuation(f, c).ok());
        block = c.block;
        end = c.end_headers;
        ++continuations;
      }
      blocks[f.header.stream_id] += block;
      if (end) fields[f.header.stream_id] = inflate(inflater, blocks[f.header.stream_id]);
    } else if (f.header.type == FrameType::kData) {
      DataFrame d;
      ASSERT_TRUE(decode_data(f, d).ok());
      EXPECT_EQ(d.flow_length, f.header.length);
      data[d.stream_id] += d.data;
      if (d.end_stream) lines.push_back("DATA " + std::to_string(d.stream_id) + " end");
    } else {
      std::string line;
      ASSERT_TRUE(frame_testing::decode_any(f, Role::kServer, &line).ok()) << line;
      lines.push_back(line);
    }
    in.remove_prefix(r.size);
  }
  nghttp2_hd_inflate_del(inflater);
  EXPECT_FALSE(sequence.in_block());

  const std::vector<std::string> want = {
      "SETTINGS 0 ack=0 1:0 2:0 3:10 4:1048576 5:1048576 6:65536",
      "PING 0 ack=0 " + std::to_string(load_u64(reinterpret_cast<const char*>(opaque))),
      "WINDOW_UPDATE 0 +70000",
      "HEADERS 1 es=0 dep=0 w=32 ex=1",
      "HEADERS 3 es=1",
      "DATA 1 end",
      "RST_STREAM 3 CANCEL",
      "WINDOW_UPDATE 1 +1000",
      "GOAWAY 0 last=0 NO_ERROR 'bye'",
  };
  EXPECT_EQ(lines, want);
  EXPECT_EQ(fields[1], post);
  EXPECT_EQ(fields[3], kSmallRequest);
  EXPECT_EQ(data[1], body.bytes);
  EXPECT_GE(continuations, 2u);
  EXPECT_GE(padded, 3u);  // both HEADERS and the DATA frames
}

}  // namespace
}  // namespace tern::http2
