// The FastCGI side of an upstream::Call (upstream/call.h): one HTTP request
// relayed to a FastCGI application (php-fpm) and its response back.
//
//   fastcgi::relay(exchange, group, options, write_params, tap);
//
// The request: BEGIN_REQUEST and PARAMS (written by `write_params`, request
// id 1 with FCGI_KEEP_CONN), then the body as STDIN records ending with an
// empty one. A chunked body is gathered first, whatever the options say,
// because PHP reads exactly CONTENT_LENGTH bytes and so has to be told it
// up front.
//
// The response: STDOUT starts with a CGI head (Status, Location, fields;
// fastcgi/cgi_response.h), which becomes the HTTP response head; the rest
// of STDOUT is the body, which ends at END_REQUEST. STDERR goes to the
// error log line by line, each line bounded. The connection is reused when
// the exchange on it ended cleanly (END_REQUEST with REQUEST_COMPLETE at a
// record boundary, nothing after it); END_REQUEST before a whole head is a
// 502, or a 503 when the application says it is overloaded.
//
// Loop thread only.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fastcgi/cgi_response.h"
#include "fastcgi/protocol.h"
#include "upstream/call.h"

namespace tern::fastcgi {

// Writes BEGIN_REQUEST and the PARAMS stream (request id 1, keep_conn) into
// `out`; `content_length` is set when the body was gathered first, once its
// length is known.
using RequestHeadWriter = std::function<void(net::Buffer& out, std::optional<uint64_t> content_length)>;

class Codec final : public upstream::Codec {
 public:
  // `log_name` names the application in its stderr lines (kept as a
  // view), which end with `request_id` (copied; at most 64 bytes kept).
  Codec(RequestHeadWriter head_writer, std::string_view log_name, std::string_view request_id,
        http::ResponseParser::Limits limits = {});

  void write_head(net::Buffer& out, std::optional<uint64_t> content_length) override;
  void write_body(net::Buffer& out, std::string_view piece, bool last) override;
  void reset() override;
  Event next(net::Buffer& input) override;
  const upstream::ResponseHead& head() const override { return view_; }
  bool reusable() const override { return clean_; }
  std::string_view error() const override { return error_; }
  int error_status() const override { return error_status_; }

 private:
  void on_stderr(std::string_view data, bool flush);
  void log_stderr_line() const;

  RequestHeadWriter head_writer_;
  std::string_view log_name_;
  std::array<char, 64> request_id_{};
  uint8_t request_id_size_ = 0;
  RecordParser records_;
  CgiHeadParser head_;
  upstream::ResponseHead view_;
  std::string_view body_after_head_;  // of the STDOUT piece the head ended in
  std::string stderr_line_;
  std::string error_;
  int error_status_ = 502;
  bool head_done_ = false;
  bool clean_ = false;
};

// Starts a Call to the application with this codec (request buffering for
// chunked bodies included).
void relay(http::Exchange& exchange, upstream::Group& group, const upstream::CallOptions& options,
           RequestHeadWriter head_writer, std::unique_ptr<upstream::ResponseTap> tap);

}  // namespace tern::fastcgi
