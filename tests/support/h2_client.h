// H2Client: nghttp2's client session for tests, the bytes carried by the
// test (to an http2::Session in memory, or over a socket).
#pragma once

#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tern::testing {

// nghttp2's view of a field list (the strings must outlive it).
inline std::vector<nghttp2_nv> to_nv(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::vector<nghttp2_nv> nv;
  for (const auto& [name, value] : fields) {
    nv.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                  reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
                  NGHTTP2_NV_FLAG_NONE});
  }
  return nv;
}

// A response as the client saw it.
struct H2Response {
  std::map<std::string, std::string> fields;  // ":status" among them
  std::string body;
  bool closed = false;
  uint32_t error_code = 0;
};

// nghttp2's client session: requests out, responses in, as bytes the test
// carries (to a Session in memory, or over a socket).
class H2Client {
 public:
  H2Client() {
    nghttp2_session_callbacks* callbacks = nullptr;
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session_callbacks_set_on_header_callback(
        callbacks, [](nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t name_length,
                      const uint8_t* value, size_t value_length, uint8_t, void* self) {
          auto& response = static_cast<H2Client*>(self)->seen[frame->hd.stream_id];
          response.fields[std::string(reinterpret_cast<const char*>(name), name_length)] =
              std::string(reinterpret_cast<const char*>(value), value_length);
          return 0;
        });
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
        callbacks, [](nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t length, void* self) {
          static_cast<H2Client*>(self)->seen[id].body.append(reinterpret_cast<const char*>(data), length);
          return 0;
        });
    nghttp2_session_callbacks_set_on_stream_close_callback(
        callbacks, [](nghttp2_session*, int32_t id, uint32_t error_code, void* self) {
          auto& response = static_cast<H2Client*>(self)->seen[id];
          response.closed = true;
          response.error_code = error_code;
          return 0;
        });
    nghttp2_session_callbacks_set_on_frame_recv_callback(
        callbacks, [](nghttp2_session*, const nghttp2_frame* frame, void* self) {
          if (frame->hd.type == NGHTTP2_GOAWAY) {
            static_cast<H2Client*>(self)->goaway_code = static_cast<int64_t>(frame->goaway.error_code);
          }
          if (frame->hd.type == NGHTTP2_PING && (frame->hd.flags & NGHTTP2_FLAG_ACK) != 0) {
            ++static_cast<H2Client*>(self)->pings_acked;
          }
          return 0;
        });
    nghttp2_session_client_new(&session_, callbacks, this);
    nghttp2_session_callbacks_del(callbacks);
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, nullptr, 0);
  }
  ~H2Client() { nghttp2_session_del(session_); }

  // A request with `fields` (pseudo-fields first) and, if not null, `body`.
  int32_t request(const std::vector<std::pair<std::string, std::string>>& fields,
                  const std::string* body = nullptr) {
    const std::vector<nghttp2_nv> nv = to_nv(fields);
    nghttp2_data_provider provider{};
    if (body != nullptr) {
      bodies_.push_back({*body, 0});
      provider.source.ptr = &bodies_.back();
      provider.read_callback = [](nghttp2_session*, int32_t, uint8_t* out, size_t length, uint32_t* flags,
                                  nghttp2_data_source* source, void*) -> ssize_t {
        auto* b = static_cast<PendingBody*>(source->ptr);
        const size_t n = std::min(length, b->bytes.size() - b->sent);
        std::memcpy(out, b->bytes.data() + b->sent, n);
        b->sent += n;
        if (b->sent == b->bytes.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
        return static_cast<ssize_t>(n);
      };
    }
    return nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(), body ? &provider : nullptr, nullptr);
  }
  // A request whose body never comes: HEADERS without END_STREAM, then nothing.
  int32_t request_stalled(const std::vector<std::pair<std::string, std::string>>& fields) {
    const std::vector<nghttp2_nv> nv = to_nv(fields);
    nghttp2_data_provider provider{};
    provider.read_callback = [](nghttp2_session*, int32_t, uint8_t*, size_t, uint32_t*, nghttp2_data_source*,
                                void*) -> ssize_t { return NGHTTP2_ERR_DEFERRED; };
    return nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(), &provider, nullptr);
  }
  int32_t get(const std::string& path) {
    return request({{":method", "GET"}, {":scheme", "https"}, {":authority", "example.test"}, {":path", path}});
  }

  std::string output() {
    std::string out;
    const uint8_t* data = nullptr;
    for (ssize_t n; (n = nghttp2_session_mem_send(session_, &data)) > 0;) {
      out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
    }
    return out;
  }
  void input(std::string_view bytes) {
    ASSERT_EQ(nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
              static_cast<ssize_t>(bytes.size()));
  }
  nghttp2_session* session() { return session_; }

  std::map<int32_t, H2Response> seen;
  int64_t goaway_code = -1;  // the server's GOAWAY, once it came
  int pings_acked = 0;

 private:
  struct PendingBody {
    std::string bytes;
    size_t sent;
  };
  nghttp2_session* session_ = nullptr;
  std::deque<PendingBody> bodies_;
};

}  // namespace tern::testing
