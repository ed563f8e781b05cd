// http2::Session's heads, both ways: a request's decoded fields read back as
// HTTP/1.1 text and parsed as HTTP/1 parses it (start), and a response's
// HTTP/1 head, as the ResponseWriter wrote it, turned into HEADERS fields
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
void Session::start(Stream& stream, bool end_stream) {
  stream.started_ = true;
  stream.body_complete_ = end_stream;
  std::string text;
  text.reserve(stream.head_text_.size() + stream.cookies_.size() + stream.path_.size() + 96);
  text.append(stream.method_).append(" ").append(stream.path_).append(" HTTP/1.1\r\n");
  if (!stream.authority_.empty()) text.append("Host: ").append(stream.authority_).append("\r\n");
  text.append(stream.head_text_);
  if (!stream.cookies_.empty()) text.append("Cookie: ").append(stream.cookies_).append("\r\n");
  // A body of unknown length, as HTTP/1 would say it.
  if (!end_stream && !stream.has_length_field_) text.append("Transfer-Encoding: chunked\r\n");
  text.append("\r\n");
  stream.head_text_ = std::move(text);
  stream.cookies_.clear();

  parser_.reset();
  const http::ParseStatus status =
      stream.too_large_ ? http::ParseStatus::kNeedMore : parser_.parse(stream.head_text_, &stream.request_);
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
  stream.request_.set_version(http::Version::kHttp2);
  stream.request_.set_received_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
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
  stream.head_.retrieve_all();
}

}  // namespace tern::http2
