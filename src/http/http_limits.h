// HttpLimits: the sizes and timeouts an HTTP/1 connection enforces, from
// the config's [limits] and [timeouts]. A value type; each loop keeps its
// copy (HttpServer::set_limits replaces it on SIGHUP).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "http1/request_parser.h"

namespace tern::http {

// What a request may be, and how long its parts may take.
struct HttpLimits {
  RequestParser::Limits parser;           // the head's limits (line, fields)
  uint64_t max_body_bytes = 1024 * 1024;  // a body past this is 413
  // A request body for a Router handler is kept in memory up to this size,
  // beyond it in an unlinked file in temp_dir.
  size_t body_buffer_bytes = 16 * 1024;
  std::string temp_dir = "/tmp";
  // How long a request's head may take to arrive whole once it has begun
  // (then 408).
  std::chrono::milliseconds header_timeout{10000};
  // The longest wait for more of a request body (then 408).
  std::chrono::milliseconds body_timeout{30000};
  // How long a connection may wait for its next request (then it closes).
  std::chrono::milliseconds keepalive_timeout{60000};
  // How long queued output may wait for the client to take any of it (then
  // the connection closes).
  std::chrono::milliseconds send_timeout{60000};
  // After deciding to close, how long to keep reading (and discarding) so
  // that the peer sees our response rather than a reset.
  std::chrono::milliseconds linger_timeout{5000};
};

}  // namespace tern::http
