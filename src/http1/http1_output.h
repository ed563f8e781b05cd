// Http1Output: a response's ResponseStream as HTTP/1.x on a connection's
// byte stream (a TcpConnection, or memory in tests). It adds the framing
// fields the writer's choice implies (Content-Length; for a stream,
// Transfer-Encoding: chunked in 1.1 and a close in 1.0), the Connection
// field, and the chunk framing of a streamed body.
//
// One per connection, begun again for each response. Loop thread only.
#pragma once

#include "http/request.h"
#include "http/response_stream.h"

namespace tern::net {
class Buffer;
class OutputStream;
}

namespace tern::http {

class Http1Output final : public ResponseStream {
 public:
  // A new response to a request of `version`, written to `output`.
  void begin(net::OutputStream* output, Version version) {
    output_ = output;
    version_ = version;
    chunked_ = false;
  }

  // The status line, Server (if not empty) and Date (if not empty), as
  // start_head writes them: what HeadStart::http1_ok_head caches.
  static void append_start(net::Buffer& out, int status, std::string_view reason, std::string_view server,
                           std::string_view date);

  void start_head(int status, std::string_view reason, const HeadStart& start) override;
  void field(std::string_view name, std::string_view value) override;
  void fields(const FieldBlock& block) override;
  bool end_head(const ResponseFraming& framing) override;
  void data(std::string_view bytes) override;
  // Copied as data() is: the head and a small body leave in one write.
  void kept_data(std::string_view bytes, const BodyOwner& /*owner*/) override { data(bytes); }
  void file(net::FileRegion region) override;
  void end() override;

 private:
  net::OutputStream* output_ = nullptr;
  Version version_ = Version::kHttp11;
  bool chunked_ = false;  // a streamed body in chunks, ended by a last chunk
};

}  // namespace tern::http
