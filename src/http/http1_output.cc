#include "http/http1_output.h"

#include <charconv>

#include "net/buffer.h"
#include "net/output_stream.h"

namespace tern::http {

net::Buffer& Http1Output::head_buffer() { return output_->output_tail_buffer(); }

bool Http1Output::end_head(const ResponseFraming& framing) {
  net::Buffer& b = output_->output_tail_buffer();
  bool keep_alive = framing.keep_alive;
  switch (framing.kind) {
    case ResponseFraming::Kind::kNone:
      // 1xx and 204 must not have a Content-Length; a 304's would describe
      // the representation it stands for, so it is left out as nginx does.
      break;
    case ResponseFraming::Kind::kLength: {
      char digits[24];
      auto [end, ec] = std::to_chars(digits, digits + sizeof digits, framing.length);
      b.append("Content-Length: ", 16);
      b.append(digits, static_cast<size_t>(end - digits));
      b.append("\r\n", 2);
      break;
    }
    case ResponseFraming::Kind::kStream:
      if (version_ == Version::kHttp11) {
        b.append("Transfer-Encoding: chunked\r\n", 28);
        chunked_ = !framing.head_only;
      } else {
        // HTTP/1.0 has no chunked coding: the body ends when the connection does.
        keep_alive = false;
      }
      break;
  }
  if (!keep_alive) {
    b.append("Connection: close\r\n", 19);
  } else if (version_ == Version::kHttp10) {
    b.append("Connection: keep-alive\r\n", 24);
  }
  b.append("\r\n", 2);
  return keep_alive;
}

void Http1Output::data(std::string_view bytes) {
  if (bytes.empty()) return;
  net::Buffer& b = output_->output_tail_buffer();
  if (!chunked_) return b.append(bytes);
  char size[20];
  auto [end, ec] = std::to_chars(size, size + sizeof size, bytes.size(), 16);
  b.ensure_writable(bytes.size() + 24);
  b.append(size, static_cast<size_t>(end - size));
  b.append("\r\n", 2);
  b.append(bytes);
  b.append("\r\n", 2);
}

void Http1Output::file(net::FileRegion region) { output_->send_file(std::move(region)); }

void Http1Output::end() {
  if (chunked_) output_->output_tail_buffer().append("0\r\n\r\n", 5);
  chunked_ = false;
}

}  // namespace tern::http
