#include "server/observability/access_log_format.h"

#include <unistd.h>

#include <array>
#include <ctime>
#include <iterator>
#include <utility>

#include "http/request.h"
#include "http/response_writer.h"
#include "net/secure_layer.h"
#include "net/tcp_connection.h"

namespace tern::server {
namespace {

using Variable = AccessLogFormat::Variable;

constexpr std::array<std::pair<std::string_view, Variable>, 30> kVariables = {{
    {"remote_addr", Variable::kRemoteAddr},
    {"realip_remote_addr", Variable::kRealipRemoteAddr},
    {"proxy_protocol_addr", Variable::kProxyProtocolAddr},
    {"remote_user", Variable::kRemoteUser},
    {"time_local", Variable::kTimeLocal},
    {"time_iso8601", Variable::kTimeIso8601},
    {"msec", Variable::kMsec},
    {"request", Variable::kRequest},
    {"request_method", Variable::kRequestMethod},
    {"request_uri", Variable::kRequestUri},
    {"uri", Variable::kUri},
    {"args", Variable::kArgs},
    {"server_protocol", Variable::kServerProtocol},
    {"status", Variable::kStatus},
    {"body_bytes_sent", Variable::kBodyBytesSent},
    {"request_time", Variable::kRequestTime},
    {"request_id", Variable::kRequestId},
    {"host", Variable::kHost},
    {"scheme", Variable::kScheme},
    {"ssl_protocol", Variable::kSslProtocol},
    {"ssl_cipher", Variable::kSslCipher},
    {"ssl_client_verify", Variable::kSslClientVerify},
    {"ssl_client_s_dn", Variable::kSslClientSDn},
    {"ssl_client_i_dn", Variable::kSslClientIDn},
    {"ssl_client_serial", Variable::kSslClientSerial},
    {"ssl_client_fingerprint", Variable::kSslClientFingerprint},
    {"pid", Variable::kPid},
    {"upstream_response_time", Variable::kUpstreamResponseTime},
    {"cache_status", Variable::kCacheStatus},
    {"upstream_cache_status", Variable::kCacheStatus},
}};

constexpr std::string_view kCombined =
    "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent \"$http_referer\" "
    "\"$http_user_agent\"";

// strftime once a second per thread and pattern.
std::string_view formatted_time(int64_t seconds, bool iso) {
  struct Cache {
    int64_t second = -1;
    char text[40];
    size_t length = 0;
  };
  thread_local Cache caches[2];
  Cache& c = caches[iso ? 1 : 0];
  if (seconds != c.second) {
    c.second = seconds;
    time_t t = static_cast<time_t>(seconds);
    tm local{};
    localtime_r(&t, &local);
    c.length = std::strftime(c.text, sizeof c.text, iso ? "%Y-%m-%dT%H:%M:%S%z" : "%d/%b/%Y:%H:%M:%S %z", &local);
    if (iso && c.length == 24) {  // +0000 -> +00:00, as ISO 8601 and nginx write it
      c.text[24] = c.text[23];
      c.text[23] = c.text[22];
      c.text[22] = ':';
      c.length = 25;
    }
  }
  return {c.text, c.length};
}

// A client certificate's: "NONE" where the site asked for one and got
// none, empty (written "-") over plain HTTP or where it asked for none.
std::string_view client_certificate_value(const net::TcpConnection& conn, Variable variable) {
  const net::SecureLayer* layer = conn.secure_layer();
  if (layer == nullptr) return {};
  const net::PeerCertificate* peer = layer->peer_certificate();
  if (peer == nullptr) return variable == Variable::kSslClientVerify ? std::string_view("NONE") : std::string_view();
  switch (variable) {
    case Variable::kSslClientVerify:
      return peer->verify;
    case Variable::kSslClientSDn:
      return peer->subject;
    case Variable::kSslClientIDn:
      return peer->issuer;
    case Variable::kSslClientSerial:
      return peer->serial;
    default:
      return peer->fingerprint;
  }
}

std::string_view tls_value(const net::TcpConnection& conn, bool cipher) {
  const net::SecureLayer* layer = conn.secure_layer();
  if (layer == nullptr) return {};
  return cipher ? layer->cipher() : layer->protocol();
}

// "1.234": seconds with milliseconds.
void append_seconds(fmt::memory_buffer& out, int64_t ms) {
  if (ms < 0) ms = 0;
  fmt::format_to(std::back_inserter(out), "{}.{:03}", ms / 1000, ms % 1000);
}

void append_text(fmt::memory_buffer& out, std::string_view value) {
  if (value.empty()) return out.push_back('-');
  for (unsigned char ch : value) {
    if (ch < 0x20 || ch == '"' || ch == '\\' || ch >= 0x7f) {
      fmt::format_to(std::back_inserter(out), "\\x{:02X}", ch);
    } else {
      out.push_back(static_cast<char>(ch));
    }
  }
}

// A JSON string; bytes outside ASCII as \u00XX, so the line is valid JSON
// (and UTF-8) whatever the client sent.
void append_json_string(fmt::memory_buffer& out, std::string_view value) {
  out.push_back('"');
  for (unsigned char ch : value) {
    if (ch == '"' || ch == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(ch));
    } else if (ch < 0x20 || ch >= 0x7f) {
      fmt::format_to(std::back_inserter(out), "\\u{:04x}", ch);
    } else {
      out.push_back(static_cast<char>(ch));
    }
  }
  out.push_back('"');
}

void append_json_optional(fmt::memory_buffer& out, std::string_view value) {
  if (value.empty()) {
    out.append(std::string_view("null"));
  } else {
    append_json_string(out, value);
  }
}

// $request_uri: the target in origin-form; for a request refused before
// its target was understood, the target as sent.
std::string_view request_uri(const http::Request& r) { return r.uri().empty() ? r.target() : r.uri(); }

// $remote_addr: the request's client (after real_ip); for a refusal before
// any request, the connection's.
const net::InetAddress& client_of(const AccessLogEntry& e) {
  return e.request.has_client_address() ? e.request.client_address() : e.conn.client_address();
}

void append_request_line(fmt::memory_buffer& out, const http::Request& request) {
  if (request.method_text().empty()) return out.push_back('-');
  append_text(out, request.method_text());
  out.push_back(' ');
  append_text(out, request.target());
  out.push_back(' ');
  out.append(http::version_name(request.version()));
}

void append_variable(fmt::memory_buffer& out, Variable v, std::string_view field, const AccessLogEntry& e) {
  const http::Request& r = e.request;
  switch (v) {
    case Variable::kRemoteAddr:
      return append_text(out, client_of(e).to_ip());
    case Variable::kRealipRemoteAddr:
      return append_text(out, e.conn.peer_address().to_ip());
    case Variable::kProxyProtocolAddr: {
      const net::ProxyHeader* header = e.conn.proxy_header();
      return header == nullptr || header->local ? out.push_back('-') : append_text(out, header->source.to_ip());
    }
    case Variable::kRemoteUser:
      return r.remote_user().empty() ? out.push_back('-') : append_text(out, r.remote_user());
    case Variable::kTimeLocal:
      return out.append(formatted_time(e.wall_seconds, false));
    case Variable::kTimeIso8601:
      return out.append(formatted_time(e.wall_seconds, true));
    case Variable::kMsec: {
      timespec now{};
      ::clock_gettime(CLOCK_REALTIME, &now);
      fmt::format_to(std::back_inserter(out), "{}.{:03}", now.tv_sec, now.tv_nsec / 1'000'000);
      return;
    }
    case Variable::kRequest:
      return append_request_line(out, r);
    case Variable::kRequestMethod:
      return append_text(out, r.method_text());
    case Variable::kRequestUri:
      return append_text(out, request_uri(r));
    case Variable::kUri:
      return append_text(out, r.path());
    case Variable::kArgs:
      return append_text(out, r.query());
    case Variable::kServerProtocol:
      return r.method_text().empty() ? out.push_back('-') : out.append(http::version_name(r.version()));
    case Variable::kStatus:
      fmt::format_to(std::back_inserter(out), "{}", e.writer.logged_status());
      return;
    case Variable::kBodyBytesSent:
      fmt::format_to(std::back_inserter(out), "{}", e.writer.body_bytes());
      return;
    case Variable::kRequestTime:
      return append_seconds(out, r.received_ms() > 0 ? e.now_ms - r.received_ms() : 0);
    case Variable::kRequestId:
      return r.method_text().empty() ? out.push_back('-') : append_text(out, r.id());
    case Variable::kHost:
      return append_text(out, r.host());
    case Variable::kScheme:
      return out.append(std::string_view(e.conn.secure() ? "https" : "http"));
    case Variable::kSslProtocol:
      return append_text(out, tls_value(e.conn, false));
    case Variable::kSslCipher:
      return append_text(out, tls_value(e.conn, true));
    case Variable::kSslClientVerify:
    case Variable::kSslClientSDn:
    case Variable::kSslClientIDn:
    case Variable::kSslClientSerial:
    case Variable::kSslClientFingerprint:
      return append_text(out, client_certificate_value(e.conn, v));
    case Variable::kPid:
      fmt::format_to(std::back_inserter(out), "{}", ::getpid());
      return;
    case Variable::kUpstreamResponseTime:
    {
      const int64_t ms = r.upstream_ms(e.now_ms);
      return ms < 0 ? out.push_back('-') : append_seconds(out, ms);
    }
    case Variable::kCacheStatus:
      return append_text(out, r.cache_status());
    case Variable::kHttpField:
      return append_text(out, r.header(field));
  }
}

void append_json(fmt::memory_buffer& out, const AccessLogEntry& e) {
  const http::Request& r = e.request;
  const bool parsed = !r.method_text().empty();
  out.append(std::string_view("{\"time\":\""));
  out.append(formatted_time(e.wall_seconds, true));
  out.append(std::string_view("\",\"remote_addr\":"));
  append_json_string(out, client_of(e).to_ip());
  out.append(std::string_view(",\"request_method\":"));
  append_json_optional(out, r.method_text());
  out.append(std::string_view(",\"request_uri\":"));
  append_json_optional(out, request_uri(r));
  out.append(std::string_view(",\"server_protocol\":"));
  append_json_optional(out, parsed ? http::version_name(r.version()) : std::string_view());
  fmt::format_to(std::back_inserter(out), ",\"status\":{},\"body_bytes_sent\":{},\"request_time\":", e.writer.logged_status(),
                 e.writer.body_bytes());
  append_seconds(out, r.received_ms() > 0 ? e.now_ms - r.received_ms() : 0);
  out.append(std::string_view(",\"host\":"));
  append_json_optional(out, r.host());
  out.append(std::string_view(e.conn.secure() ? ",\"scheme\":\"https\"" : ",\"scheme\":\"http\""));
  out.append(std::string_view(",\"request_id\":"));
  append_json_optional(out, parsed ? r.id() : std::string_view());
  out.append(std::string_view(",\"http_referer\":"));
  append_json_optional(out, r.header(http::FieldId::kReferer));
  out.append(std::string_view(",\"http_user_agent\":"));
  append_json_optional(out, r.header(http::FieldId::kUserAgent));
  out.append(std::string_view(",\"ssl_protocol\":"));
  append_json_optional(out, tls_value(e.conn, false));
  out.append(std::string_view(",\"upstream_response_time\":"));
  if (const int64_t ms = r.upstream_ms(e.now_ms); ms < 0) {
    out.append(std::string_view("null"));
  } else {
    append_seconds(out, ms);
  }
  out.append(std::string_view(",\"cache_status\":"));
  append_json_optional(out, r.cache_status());
  out.push_back('}');
}

bool name_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

}  // namespace

std::optional<AccessLogFormat> AccessLogFormat::parse(std::string_view text, std::string* error) {
  AccessLogFormat format;
  if (text == "json") {
    format.json_ = true;
    return format;
  }
  if (text == "combined") text = kCombined;
  std::string literal;
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '$') {
      literal.push_back(text[i++]);
      continue;
    }
    size_t start = i + 1;
    size_t end = start;
    const bool braced = start < text.size() && text[start] == '{';
    if (braced) ++start, ++end;
    while (end < text.size() && name_char(text[end])) ++end;
    std::string_view name = text.substr(start, end - start);
    if (braced && (end >= text.size() || text[end] != '}')) {
      *error = "\"${" + std::string(name) + "\" has no closing '}'";
      return std::nullopt;
    }
    if (name.empty()) {
      *error = "a '$' at offset " + std::to_string(i) + " names no variable";
      return std::nullopt;
    }
    Piece piece;
    if (name.starts_with("http_") && name.size() > 5) {
      piece.variable = Variable::kHttpField;
      for (char c : name.substr(5)) piece.text.push_back(c == '_' ? '-' : c);
    } else {
      for (const auto& [known, variable] : kVariables) {
        if (known == name) piece.variable = variable;
      }
    }
    if (!piece.variable) {
      std::string names;
      for (const auto& [known, variable] : kVariables) names += (names.empty() ? "$" : ", $") + std::string(known);
      *error = "unknown variable $" + std::string(name) + " (known: " + names + ", $http_NAME)";
      return std::nullopt;
    }
    if (!literal.empty()) format.pieces_.push_back({std::exchange(literal, {}), std::nullopt});
    format.pieces_.push_back(std::move(piece));
    i = end + (braced ? 1 : 0);
  }
  if (!literal.empty()) format.pieces_.push_back({std::move(literal), std::nullopt});
  return format;
}

void AccessLogFormat::append(fmt::memory_buffer& out, const AccessLogEntry& entry) const {
  if (json_) return append_json(out, entry);
  for (const Piece& piece : pieces_) {
    if (piece.variable) {
      append_variable(out, *piece.variable, piece.text, entry);
    } else {
      out.append(piece.text);
    }
  }
}

}  // namespace tern::server
