#include "proxy/http_codec.h"

#include <algorithm>
#include <limits>

#include "http/field_values.h"
#include "net/buffer.h"

namespace tern::proxy {
namespace {

http::ChunkedDecoder::Limits response_chunk_limits() {
  // The body's size is the upstream's business (a download may be of any
  // length); the decoder bounds its lines and trailers, and the Call the
  // bytes it holds.
  http::ChunkedDecoder::Limits limits;
  limits.max_body = std::numeric_limits<uint64_t>::max();
  limits.max_framing = std::numeric_limits<uint64_t>::max();
  return limits;
}

// Connection: upgrade with an Upgrade field, in HTTP/1.1 (RFC 9110 7.8).
bool asks_to_upgrade(const http::Request& request) {
  if (request.version() != http::Version::kHttp11 || request.header(http::FieldId::kUpgrade).empty()) return false;
  http::fields::ConnectionOptions connection;
  for (const http::Header& field : request.headers()) {
    if (field.id == http::FieldId::kConnection) connection.note(field.value);
  }
  return connection.upgrade;
}

}  // namespace

HttpCodec::HttpCodec(const http::Request& request, const ForwardOptions& options,
                     http::ResponseParser::Limits limits)
    : request_(request),
      options_(options),
      target_(options.target),
      head_request_(options.method.empty() ? request.method() == http::Method::kHead : options.method == "HEAD"),
      parser_(limits),
      chunked_(response_chunk_limits()) {
  options_.target = target_;
  options_.upgrade = options.method.empty() && asks_to_upgrade(request);
  if (options.client != nullptr) {
    client_ = *options.client;
    options_.client = &client_;
  }
}

void HttpCodec::write_head(net::Buffer& out, std::optional<uint64_t> content_length) {
  options_.chunked = false;
  if (!options_.method.empty()) {
    options_.content_length.reset();  // a request of its own: no body
  } else if (content_length) {
    options_.content_length = content_length;
  } else if (request_.body_framing() == http::BodyFraming::kContentLength) {
    options_.content_length = request_.content_length();
  } else {
    options_.content_length.reset();
  }
  write_forward_head(request_, options_, out);
}

void HttpCodec::write_body(net::Buffer& out, std::string_view piece, bool /*last*/) {
  if (!piece.empty()) out.append(piece.data(), piece.size());
}

void HttpCodec::reset() {
  parser_.reset();
  head_ = {};
  view_ = {};
  chunked_.reset();
  left_ = 0;
  error_.clear();
  head_done_ = false;
  connection_field_ = false;
  ended_ = false;
}

upstream::Codec::Event HttpCodec::fail(std::string_view what, std::string_view why) {
  error_.assign(what).append(": ").append(why);
  return {Event::kError, {}};
}

upstream::Codec::Event HttpCodec::read_head(net::Buffer& input) {
  for (;;) {
    switch (parser_.parse(input.view(), head_request_, &head_)) {
      case http::ParseStatus::kNeedMore:
        return {};
      case http::ParseStatus::kError:
        return fail("bad response head", parser_.error_reason());
      case http::ParseStatus::kComplete:
        break;
    }
    // Retrieving keeps the bytes in place until the next read: the head's
    // views stay valid for the Call, which reads them now.
    input.retrieve(head_.head_size);
    if (!head_.interim()) break;
    parser_.reset();  // 100 Continue, 103 Early Hints: the final head follows
    head_ = {};
  }
  if (head_.status == 101 && !options_.upgrade) {
    return fail("bad response", "101 Switching Protocols to a request that asked for none");
  }
  head_done_ = true;
  connection_field_ = std::any_of(head_.headers.begin(), head_.headers.end(),
                                  [](const http::Header& field) { return http::iequals(field.name, "Connection"); });
  view_.status = head_.status;
  view_.reason = head_.reason;
  view_.headers = head_.headers;
  if (head_.body == http::ResponseHead::Body::kLength) {
    view_.content_length = left_ = head_.content_length;
  } else if (head_request_) {
    // The length of the body a GET would have had, for the client's HEAD.
    std::optional<uint64_t> length;
    if (std::string_view value = head_.header("Content-Length"); !value.empty() &&
        http::fields::note_content_length(value, &length)) {
      view_.content_length = length;
    }
  }
  return {Event::kHead, {}};
}

upstream::Codec::Event HttpCodec::next(net::Buffer& input) {
  if (!head_done_) return read_head(input);
  if (ended_) return {Event::kEnd, {}};
  switch (head_.body) {
    case http::ResponseHead::Body::kNone:
      ended_ = true;
      return {Event::kEnd, {}};
    case http::ResponseHead::Body::kLength: {
      if (left_ == 0) {
        ended_ = true;
        return {Event::kEnd, {}};
      }
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left_, input.readable_bytes()));
      if (n == 0) return {};
      const std::string_view data(input.peek(), n);
      input.retrieve(n);
      left_ -= n;
      return {Event::kBody, data};
    }
    case http::ResponseHead::Body::kChunked: {
      size_t used = 0;
      std::string_view data;
      const auto status = chunked_.next(input.view(), &used, &data);
      input.retrieve(used);
      switch (status) {
        case http::ChunkedDecoder::kData:
          return {Event::kBody, data};
        case http::ChunkedDecoder::kNeedMore:
          return {};
        case http::ChunkedDecoder::kDone:
          ended_ = true;
          return {Event::kEnd, {}};
        case http::ChunkedDecoder::kError:
          return fail("bad chunked body", chunked_.error_reason());
      }
      return {};
    }
    case http::ResponseHead::Body::kUntilClose: {
      if (input.empty()) return {};
      const std::string_view data = input.view();
      input.retrieve_all();
      return {Event::kBody, data};
    }
  }
  return {};
}

bool HttpCodec::reusable() const {
  return ended_ && head_.keep_alive && head_.body != http::ResponseHead::Body::kUntilClose;
}

bool HttpCodec::ends_at_close() const {
  return head_done_ && head_.body == http::ResponseHead::Body::kUntilClose;
}

bool HttpCodec::hop_field(std::string_view name) const {
  if (http::iequals(name, "TE") || http::iequals(name, "Trailer") || http::iequals(name, "Upgrade")) {
    return true;
  }
  // Proxy-Connection, Proxy-Authenticate and the rest: between the
  // upstream and us.
  if (name.size() > 6 && http::iequals(name.substr(0, 6), "Proxy-")) return true;
  // And every field the upstream's Connection names (RFC 9110 7.6.1).
  if (!connection_field_) return false;
  bool named = false;
  for (const http::Header& field : head_.headers) {
    if (!http::iequals(field.name, "Connection")) continue;
    http::fields::for_each_element(field.value, [&](std::string_view option) {
      named = named || http::iequals(option, name);
      return !named;
    });
  }
  return named;
}

}  // namespace tern::proxy
