#include "auth/mysql_url.h"

#include <cerrno>
#include <charconv>
#include <optional>

#include "http/uri.h"

namespace tern::auth {

namespace {

// Decodes %XX escapes. NUL is refused: the client library takes C strings.
std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  if (!http::percent_decode(text, &out) || out.find('\0') != std::string::npos) return std::nullopt;
  return out;
}

constexpr Error url_error(const char* what) { return Error{EINVAL, what}; }

// HOST[:PORT] or [IPV6][:PORT] into url->host and url->port; `has_port`
// says whether a port was written.
Result<void> parse_host_port(std::string_view hostport, MysqlUrl* url, bool* has_port) {
  std::string_view port;
  *has_port = false;
  if (!hostport.empty() && hostport.front() == '[') {
    size_t close = hostport.find(']');
    if (close == std::string_view::npos) return url_error("mysql URL: unclosed '[' in the host");
    url->host = std::string(hostport.substr(1, close - 1));
    std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return url_error("mysql URL: junk after ']' in the host");
      port = after.substr(1);
      *has_port = true;
    }
  } else {
    size_t colon = hostport.find(':');
    url->host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = hostport.substr(colon + 1);
      *has_port = true;
      if (port.find(':') != std::string_view::npos) {
        return url_error("mysql URL: an IPv6 host must be written in brackets ([::1])");
      }
    }
  }
  if (*has_port) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value == 0 ||
        value > 65535) {
      return url_error("mysql URL: the port must be a number from 1 to 65535");
    }
    url->port = static_cast<uint16_t>(value);
  }
  return {};
}

// The query: socket=PATH is the only parameter.
Result<void> parse_query(std::string_view query, MysqlUrl* url) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (param.empty()) continue;
    if (!param.starts_with("socket=")) {
      return url_error("mysql URL: unknown parameter (only socket=PATH is known)");
    }
    std::optional<std::string> path = percent_decode(param.substr(7));
    if (!path) return url_error("mysql URL: bad percent-encoding in the socket path");
    if (path->empty()) return url_error("mysql URL: empty socket path");
    url->socket = std::move(*path);
  }
  return {};
}

}  // namespace

Result<MysqlUrl> parse_mysql_url(std::string_view text) {
  std::string_view rest;
  if (text.starts_with("mysql://")) {
    rest = text.substr(8);
  } else if (text.starts_with("mariadb://")) {
    rest = text.substr(10);
  } else {
    return url_error("database URL must start with mysql:// or mariadb://");
  }
  if (rest.find('#') != std::string_view::npos) {
    return url_error("mysql URL: '#' must be percent-encoded (%23)");
  }
  MysqlUrl url;
  size_t authority_end = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, authority_end);
  rest = authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);

  size_t at = authority.rfind('@');
  if (at == std::string_view::npos) return url_error("mysql URL: no user@ before the host");
  std::string_view userinfo = authority.substr(0, at);
  size_t colon = userinfo.find(':');
  std::optional<std::string> user = percent_decode(userinfo.substr(0, colon));
  std::optional<std::string> password =
      colon == std::string_view::npos ? std::string() : percent_decode(userinfo.substr(colon + 1));
  if (!user || !password) return url_error("mysql URL: bad percent-encoding in user or password");
  if (user->empty()) return url_error("mysql URL: empty user name");
  url.user = std::move(*user);
  url.password = std::move(*password);

  bool has_port = false;
  Result<void> host = parse_host_port(authority.substr(at + 1), &url, &has_port);
  if (!host) return host.error();

  if (rest.empty() || rest.front() != '/') return url_error("mysql URL: no /database after the host");
  size_t query_start = rest.find('?');
  std::string_view database = rest.substr(1, query_start == std::string_view::npos
                                                 ? std::string_view::npos
                                                 : query_start - 1);
  if (database.find('/') != std::string_view::npos) {
    return url_error("mysql URL: '/' in the database name");
  }
  std::optional<std::string> db = percent_decode(database);
  if (!db) return url_error("mysql URL: bad percent-encoding in the database name");
  if (db->empty()) return url_error("mysql URL: empty database name");
  url.database = std::move(*db);
  if (query_start != std::string_view::npos) {
    Result<void> query = parse_query(rest.substr(query_start + 1), &url);
    if (!query) return query.error();
  }

  if (url.socket.empty()) {
    if (url.host.empty()) return url_error("mysql URL: empty host");
  } else {
    if (has_port) return url_error("mysql URL: a port and socket= together");
    if (url.host.empty()) url.host = "localhost";
    if (url.host != "localhost") return url_error("mysql URL: socket= needs the host localhost");
  }
  return url;
}

std::string MysqlUrl::describe() const {
  std::string s = "mysql://" + user + "@";
  bool ipv6 = host.find(':') != std::string::npos;
  s += ipv6 ? "[" + host + "]" : host;
  if (socket.empty()) s += ":" + std::to_string(port);
  s += "/" + database;
  if (!socket.empty()) s += "?socket=" + socket;
  return s;
}

}  // namespace tern::auth
