// AccessLogFormat: what one access-log line says, compiled once from the
// config's `access_log_format`:
//
//   "combined"  the Combined Log Format (the default), as Apache and nginx:
//               $remote_addr - $remote_user [$time_local] "$request" $status
//               $body_bytes_sent "$http_referer" "$http_user_agent"
//   "json"      one JSON object a line (time, remote_addr, request_method,
//               request_uri, server_protocol, status, body_bytes_sent,
//               request_time, host, scheme, request_id, http_referer,
//               http_user_agent, ssl_protocol, upstream_response_time,
//               cache_status)
//   otherwise   text with nginx-style variables, $name or ${name}:
//               remote_addr (the client, after real_ip)
//               realip_remote_addr (the TCP peer: a proxy in front)
//               proxy_protocol_addr (the client a PROXY header named)
//               remote_user time_local time_iso8601 msec
//               request request_method request_uri uri args
//               server_protocol status body_bytes_sent request_time
//               request_id host scheme ssl_protocol ssl_cipher pid
//               ssl_client_verify (SUCCESS, FAILED:reason, NONE)
//               ssl_client_s_dn ssl_client_i_dn ssl_client_serial
//               ssl_client_fingerprint (a client certificate's: mutual TLS)
//               upstream_response_time (seconds on upstream or FastCGI
//               servers, every attempt summed; "-" without)
//               cache_status, also upstream_cache_status (what a [[cache]]
//               did: HIT MISS EXPIRED STALE UPDATING REVALIDATED BYPASS)
//               http_NAME (a request field: http_x_forwarded_for)
//
// In text, a value's '"', '\' and bytes outside printable ASCII are written
// \xHH (so no client can forge a line) and an empty value is "-"; in JSON
// they are escaped as JSON.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tern::net {
class TcpConnection;
}  // namespace tern::net

namespace tern::http {
class Request;
class ResponseWriter;
}  // namespace tern::http

namespace tern::server {

// What a line is made from: the response just sent, and the time.
struct AccessLogEntry {
  const http::Request& request;
  const net::TcpConnection& conn;
  const http::ResponseWriter& writer;
  int64_t now_ms;        // the loop's steady clock (request_time)
  int64_t wall_seconds;  // the loop's wall clock
};

class AccessLogFormat {
 public:
  // The format `text` names or spells, or nullopt with `*error` saying what
  // is wrong (an unknown variable, with the known ones).
  static std::optional<AccessLogFormat> parse(std::string_view text, std::string* error);

  void append(fmt::memory_buffer& out, const AccessLogEntry& entry) const;

  enum class Variable : uint8_t {
    kRemoteAddr, kRealipRemoteAddr, kProxyProtocolAddr, kRemoteUser, kTimeLocal, kTimeIso8601, kMsec, kRequest, kRequestMethod, kRequestUri,
    kUri, kArgs, kServerProtocol, kStatus, kBodyBytesSent, kRequestTime, kRequestId, kHost, kScheme,
    kSslProtocol, kSslCipher, kSslClientVerify, kSslClientSDn, kSslClientIDn, kSslClientSerial,
    kSslClientFingerprint, kPid, kUpstreamResponseTime, kCacheStatus, kHttpField,
  };

 private:
  struct Piece {
    std::string text;  // a literal, or the field name of kHttpField
    std::optional<Variable> variable;
  };
  bool json_ = false;
  std::vector<Piece> pieces_;
};

}  // namespace tern::server
