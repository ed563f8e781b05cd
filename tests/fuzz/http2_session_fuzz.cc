// libFuzzer harness for http2::Session: whatever frames a client sends, no
// crash, no sanitizer report, and the bounds hold (streams open at most
// max_concurrent_streams, a request's body held at most its window). The
// input follows a valid start (the client preface, SETTINGS and a GET, as
// nghttp2's client writes them) when its first byte is even, so the fuzzer
// spends its time inside a live connection; it arrives in pieces whose cut
// points come from the data. Every request is answered: small ones at once,
// the others as a stream that pauses its body and writes in two steps.
#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "http/response_writer.h"
#include "http2/session.h"

namespace {

using tern::fuzz::mix;
using tern::http2::Session;
using tern::http2::SessionLimits;
using tern::http2::Stream;

// What nghttp2's client sends first: the preface, its SETTINGS, one GET.
std::string client_start() {
  nghttp2_session_callbacks* callbacks = nullptr;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session* client = nullptr;
  nghttp2_session_client_new(&client, callbacks, nullptr);
  nghttp2_session_callbacks_del(callbacks);
  nghttp2_submit_settings(client, NGHTTP2_FLAG_NONE, nullptr, 0);
  const char* fields[][2] = {{":method", "GET"}, {":scheme", "https"}, {":authority", "f"}, {":path", "/"}};
  std::vector<nghttp2_nv> nv;
  for (auto& [name, value] : fields) {
    nv.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(name)),
                  reinterpret_cast<uint8_t*>(const_cast<char*>(value)), std::char_traits<char>::length(name),
                  std::char_traits<char>::length(value), NGHTTP2_NV_FLAG_NONE});
  }
  nghttp2_submit_request(client, nullptr, nv.data(), nv.size(), nullptr, nullptr);
  std::string out;
  const uint8_t* data = nullptr;
  for (ssize_t n; (n = nghttp2_session_mem_send(client, &data)) > 0;) {
    out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
  nghttp2_session_del(client);
  return out;
}

void answer(Stream& stream, bool streamed) {
  tern::http::ResponseWriter::Context context;
  context.stream = &stream;
  tern::http::ResponseWriter writer(context);
  writer.start(200).header("Content-Type", "text/plain");
  if (!streamed) return writer.body("fuzz");
  writer.begin_stream();
  writer.write(std::string(3000, 's'));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string start = client_start();
  const std::string_view fuzz(reinterpret_cast<const char*>(data), size);
  std::string input;
  if (size > 0 && data[0] % 2 == 0) input = start;
  input.append(fuzz.substr(size > 0 ? 1 : 0));

  SessionLimits limits;
  limits.max_concurrent_streams = 8;
  limits.stream_window = 4096;
  limits.parser.max_head_bytes = 2048;
  std::vector<Stream*> streaming;
  Session::Callbacks callbacks;
  callbacks.on_request = [&](Stream& stream) {
    const bool streamed = stream.request().path().size() > 1;
    if (streamed) {
      stream.pause_body();
      streaming.push_back(&stream);
    }
    answer(stream, streamed);
  };
  callbacks.on_body = [&](Stream& stream, std::string_view, bool) {
    FUZZ_CHECK(stream.held_bytes() <= limits.stream_window);
  };
  callbacks.on_close = [&](Stream& stream) {
    std::erase(streaming, &stream);
  };
  Session session(limits, std::move(callbacks));

  uint64_t h = mix(fuzz);
  size_t at = 0;
  tern::net::Buffer out;
  while (at < input.size()) {
    const size_t piece = 1 + h % 97;
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    const std::string_view bytes = std::string_view(input).substr(at, piece);
    at += bytes.size();
    const bool ok = session.receive(bytes);
    FUZZ_CHECK(session.open_streams() <= limits.max_concurrent_streams);
    // The streamed answers go on: held bodies let in, the rest written.
    for (Stream* stream : std::vector<Stream*>(streaming)) {
      FUZZ_CHECK(stream->held_bytes() <= limits.stream_window);
      if (h % 3 == 0) stream->resume_body();
      if (h % 5 == 0) {
        stream->data("end");
        stream->end();
        std::erase(streaming, stream);
      }
    }
    session.send(out);
    out.retrieve_all();
    if (!ok) break;
  }
  return 0;
}
