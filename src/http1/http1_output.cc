#include "http1/http1_output.h"

#include <charconv>
#include <cstring>

#include "http/status.h"
#include "net/buffer.h"
#include "net/output_stream.h"

namespace tern::http {
namespace {

// One check for room, then the bytes: a head is many short pieces.
void append_field(net::Buffer& out, std::string_view name, std::string_view value) {
  const size_t size = name.size() + value.size() + 4;
  out.ensure_writable(size);
  char* p = out.begin_write();
  // (An empty view's data() may be null, which memcpy must not see.)
  if (!name.empty()) std::memcpy(p, name.data(), name.size());
  p += name.size();
  std::memcpy(p, ": ", 2);
  if (!value.empty()) std::memcpy(p + 2, value.data(), value.size());
  std::memcpy(p + 2 + value.size(), "\r\n", 2);
  out.has_written(size);
}

}  // namespace

void Http1Output::append_start(net::Buffer& b, int status, std::string_view reason, std::string_view server,
                               std::string_view date) {
  if (reason.empty()) reason = reason_phrase(status);
  b.ensure_writable(64 + reason.size() + date.size() + server.size());
  // Always our own version, also to 1.0 clients (RFC 9110 6.2); what the
  // client's version changes is the framing and Connection handling.
  char line[12] = {'H', 'T', 'T', 'P', '/', '1', '.', '1', ' ', static_cast<char>('0' + status / 100 % 10),
                   static_cast<char>('0' + status / 10 % 10), static_cast<char>('0' + status % 10)};
  b.append(line, sizeof line);
  b.append(" ", 1);
  b.append(reason);
  b.append("\r\n", 2);
  if (!server.empty()) append_field(b, "Server", server);
  if (!date.empty()) append_field(b, "Date", date);
}

void Http1Output::start_head(int status, std::string_view reason, const HeadStart& start) {
  net::Buffer& b = output_->output_tail_buffer();
  if (status == 200 && reason.empty() && !start.http1_ok_head.empty()) {
    b.append(start.http1_ok_head);
  } else {
    append_start(b, status, reason, start.server, start.date);
  }
}

// The output's tail is asked for each time rather than kept from
// start_head(): a pointer more would take Http1Connection past 128 bytes.
void Http1Output::field(std::string_view name, std::string_view value) {
  append_field(output_->output_tail_buffer(), name, value);
}

void Http1Output::fields(const FieldBlock& block) { output_->output_tail_buffer().append(block.text()); }

bool Http1Output::end_head(const ResponseFraming& framing) {
  net::Buffer& b = output_->output_tail_buffer();
  bool keep_alive = framing.keep_alive;
  switch (framing.kind) {
    case ResponseFraming::Kind::kNone:
      // 1xx and 204 must not have a Content-Length; a 304's would describe
      // the representation it stands for, so it is left out as nginx does.
      break;
    case ResponseFraming::Kind::kLength: {
      constexpr std::string_view kName = "Content-Length: ";
      b.ensure_writable(kName.size() + 20 + 2);
      char* const start = b.begin_write();
      std::memcpy(start, kName.data(), kName.size());
      char* const digits = start + kName.size();
      char* end = std::to_chars(digits, digits + 20, framing.length).ptr;
      std::memcpy(end, "\r\n", 2);
      b.has_written(static_cast<size_t>(end + 2 - start));
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
