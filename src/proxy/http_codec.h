// HttpCodec: the reverse proxy's side of an upstream::Call
// (upstream/call.h): a client's request forwarded to an upstream HTTP/1.1
// server and the server's response read back.
//
// The request goes as write_forward_head() makes it (proxy/forward_head.h)
// with its body as it came, under a Content-Length (a chunked body is
// gathered first by the Call, so its length is known). The response head is
// read by http::ResponseParser, as strictly: interim responses (100
// Continue, 103 Early Hints) are dropped, and the final one's body is
// framed as RFC 9112 says: none (HEAD, 204, 304), a Content-Length, chunked
// (decoded here, and sent on to the client in chunks of the server's own),
// or until the upstream closes. A response the parser refuses, a broken
// chunked body, or bytes after a response on a connection that said it
// would close: 502, and the connection is not reused. The connection goes
// back to the pool when the response ended where its framing said, the
// upstream did not say "Connection: close", and nothing followed it.
//
// A request to switch protocols (Connection: upgrade with an Upgrade, as a
// WebSocket handshake) goes with its Upgrade; a 101 answer to it is the
// head of a tunnel (upgraded()). A 101 nobody asked for is a 502.
//
// One per Call; loop thread only.
#pragma once

#include <string>

#include "http1/chunked_decoder.h"
#include "http1/response_parser.h"
#include "net/inet_address.h"
#include "proxy/forward_head.h"
#include "upstream/call.h"

namespace tern::proxy {

class HttpCodec final : public upstream::Codec {
 public:
  // `request` (the exchange's) outlives the codec, and so do the views in
  // `options` but its target and client, which the codec copies.
  HttpCodec(const http::Request& request, const ForwardOptions& options,
            http::ResponseParser::Limits limits = {});
  HttpCodec(const HttpCodec&) = delete;
  HttpCodec& operator=(const HttpCodec&) = delete;

  void write_head(net::Buffer& out, std::optional<uint64_t> content_length) override;
  void write_body(net::Buffer& out, std::string_view piece, bool last) override;
  void reset() override;
  Event next(net::Buffer& input) override;
  const upstream::ResponseHead& head() const override { return view_; }
  bool reusable() const override;
  bool ends_at_close() const override;
  bool hop_field(std::string_view name) const override;
  bool upgraded() const override { return head_done_ && head_.status == 101; }
  std::string_view error() const override { return error_; }

 private:
  Event read_head(net::Buffer& input);
  Event fail(std::string_view what, std::string_view why);

  const http::Request& request_;
  ForwardOptions options_;
  std::string target_;
  net::InetAddress client_;
  const bool head_request_;
  http::ResponseParser parser_;
  http::ResponseHead head_;
  upstream::ResponseHead view_;
  http::ChunkedDecoder chunked_;
  uint64_t left_ = 0;  // of a body with a length
  std::string error_;
  bool head_done_ = false;
  bool connection_field_ = false;  // the head has a Connection field (hop_field looks)
  bool ended_ = false;
};

}  // namespace tern::proxy
