#include "fastcgi/params.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "http1/request_parser.h"
#include "net/buffer.h"

namespace tern::fastcgi {
namespace {

// A request parsed from its text; the text lives as long as the Request's views.
struct ParsedRequest {
  explicit ParsedRequest(std::string head) : text(std::move(head)) {
    http::RequestParser parser;
    status = parser.parse(text, &request);
  }
  std::string text;
  http::Request request;
  http::ParseStatus status;
};

// The PARAMS stream in `bytes`, checked record by record (read by hand, not
// with the encoder's own code) and decoded into name-value pairs in order.
std::vector<std::pair<std::string, std::string>> decode_params(std::string_view bytes) {
  std::string content;
  bool ended = false;
  while (!bytes.empty()) {
    EXPECT_FALSE(ended) << "bytes after the empty PARAMS record";
    if (bytes.size() < kHeaderSize) {
      ADD_FAILURE() << "a partial record header";
      break;
    }
    auto u = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
    EXPECT_EQ(u(0), kVersion);
    EXPECT_EQ(u(1), static_cast<uint8_t>(RecordType::kParams));
    EXPECT_EQ(u(2) << 8 | u(3), 1) << "request id";
    const size_t length = static_cast<size_t>(u(4) << 8 | u(5));
    const size_t padding = u(6);
    EXPECT_EQ((length + padding) % 8, 0u) << "records are padded to a multiple of 8";
    if (bytes.size() < kHeaderSize + length + padding) {
      ADD_FAILURE() << "a truncated record";
      break;
    }
    content.append(bytes.substr(kHeaderSize, length));
    if (length == 0) ended = true;
    bytes.remove_prefix(kHeaderSize + length + padding);
  }
  EXPECT_TRUE(ended) << "no empty PARAMS record at the end";
  std::vector<std::pair<std::string, std::string>> pairs;
  EXPECT_TRUE(decode_pairs(content, [&](std::string_view name, std::string_view value) {
    pairs.emplace_back(name, value);
  }));
  return pairs;
}

struct Params {
  std::vector<std::pair<std::string, std::string>> pairs;
  size_t count(const std::string& name) const {
    size_t n = 0;
    for (const auto& [k, v] : pairs) n += k == name;
    return n;
  }
  // The value of the single variable `name`, or nullopt (failing the test
  // if it appears more than once).
  std::optional<std::string> get(const std::string& name) const {
    EXPECT_LE(count(name), 1u) << name << " appears more than once";
    for (const auto& [k, v] : pairs) {
      if (k == name) return v;
    }
    return std::nullopt;
  }
};

Params write(const http::Request& request, const CgiContext& cgi,
             std::optional<uint64_t> content_length = std::nullopt) {
  net::Buffer out;
  ParamsWriter writer(out, 1);
  write_cgi_params(writer, request, cgi, content_length);
  writer.finish();
  return Params{decode_params(out.view())};
}

CgiContext context() {
  CgiContext cgi;
  cgi.script_filename = "/srv/www/app/index.php";
  cgi.script_name = "/app/index.php";
  cgi.path_info = "/extra/path";
  cgi.document_root = "/srv/www";
  cgi.document_uri = "/app/index.php/extra/path";
  cgi.server_software = "tern/0.1.0";
  cgi.server_name = "example.com";
  cgi.server_address = *net::InetAddress::parse("127.0.0.1:8080");
  cgi.remote_address = *net::InetAddress::parse("10.0.0.7:54321");
  return cgi;
}

TEST(CgiParams, EveryVariableIsPresentWithItsValue) {
  ParsedRequest r(
      "GET /app/index.php/extra/path?x=1&y=%20z HTTP/1.1\r\nHost: example.com:8080\r\n\r\n");
  ASSERT_EQ(r.status, http::ParseStatus::kComplete);
  Params p = write(r.request, context());
  const std::map<std::string, std::string> expected = {
      {"GATEWAY_INTERFACE", "CGI/1.1"},
      {"REQUEST_SCHEME", "http"},
      {"SERVER_SOFTWARE", "tern/0.1.0"},
      {"SERVER_PROTOCOL", "HTTP/1.1"},
      {"REQUEST_METHOD", "GET"},
      {"REQUEST_URI", "/app/index.php/extra/path?x=1&y=%20z"},
      {"DOCUMENT_URI", "/app/index.php/extra/path"},
      {"DOCUMENT_ROOT", "/srv/www"},
      {"SCRIPT_NAME", "/app/index.php"},
      {"SCRIPT_FILENAME", "/srv/www/app/index.php"},
      {"PATH_INFO", "/extra/path"},
      {"QUERY_STRING", "x=1&y=%20z"},
      {"REDIRECT_STATUS", "200"},
      {"CONTENT_TYPE", ""},
      {"CONTENT_LENGTH", ""},
      {"SERVER_NAME", "example.com"},
      {"SERVER_ADDR", "127.0.0.1"},
      {"SERVER_PORT", "8080"},
      {"REMOTE_ADDR", "10.0.0.7"},
      {"REMOTE_PORT", "54321"},
      {"HTTP_HOST", "example.com:8080"},
  };
  for (const auto& [name, value] : expected) {
    EXPECT_EQ(p.get(name), value) << name;
  }
  EXPECT_EQ(p.get("HTTPS"), std::nullopt);
  // Made here: 32 hex digits (RequestIdIs... below).
  ASSERT_TRUE(p.get("REQUEST_ID").has_value());
  EXPECT_EQ(p.get("REQUEST_ID")->size(), 32u);
  EXPECT_EQ(p.pairs.size(), expected.size() + 1) << "unexpected extra variables";
}

TEST(CgiParams, AnAbsoluteFormTargetGivesItsAuthorityAsHostAndItsOriginFormAsUri) {
  // RFC 9112 3.2.2: the target's authority wins over the Host field.
  ParsedRequest r("GET http://admin.example/secret/index.php?x=1 HTTP/1.1\r\nHost: public.example\r\n\r\n");
  ASSERT_EQ(r.status, http::ParseStatus::kComplete);
  Params p = write(r.request, context());
  EXPECT_EQ(p.get("HTTP_HOST"), "admin.example");
  EXPECT_EQ(p.get("REQUEST_URI"), "/secret/index.php?x=1");
  EXPECT_EQ(p.get("QUERY_STRING"), "x=1");
  size_t hosts = 0;
  for (const auto& [name, value] : p.pairs) hosts += name == "HTTP_HOST";
  EXPECT_EQ(hosts, 1u);

  ParsedRequest bare("GET http://admin.example?y=2 HTTP/1.1\r\nHost: public.example\r\n\r\n");
  ASSERT_EQ(bare.status, http::ParseStatus::kComplete);
  EXPECT_EQ(write(bare.request, context()).get("REQUEST_URI"), "/?y=2");
}

TEST(CgiParams, RequestIdIsTheClientsWhenWellFormedElseMadeHere) {
  ParsedRequest given("GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: abc-123_x.y\r\n\r\n");
  ASSERT_EQ(given.status, http::ParseStatus::kComplete);
  EXPECT_EQ(write(given.request, context()).get("REQUEST_ID"), "abc-123_x.y");

  ParsedRequest forged("GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: a b\r\n\r\n");
  ASSERT_EQ(forged.status, http::ParseStatus::kComplete);
  const std::optional<std::string> made = write(forged.request, context()).get("REQUEST_ID");
  ASSERT_TRUE(made.has_value());
  EXPECT_EQ(made->size(), 32u);
  EXPECT_EQ(made->find_first_not_of("0123456789abcdef"), std::string::npos) << *made;
  // The same request keeps its id; another gets another.
  EXPECT_EQ(forged.request.id(), *made);
  ParsedRequest other("GET / HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_NE(other.request.id(), *made);
}

TEST(CgiParams, HttpsIsOnOnlyWhenSet) {
  ParsedRequest r("GET / HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_EQ(r.status, http::ParseStatus::kComplete);
  CgiContext cgi = context();
  cgi.https = true;
  EXPECT_EQ(write(r.request, cgi).get("HTTPS"), "on");
  EXPECT_EQ(write(r.request, cgi).get("REQUEST_SCHEME"), "https");
}

// Mutual TLS: the client certificate as mod_ssl names its parts; only
// SSL_CLIENT_VERIFY without one, nothing where none was asked for.
TEST(CgiParams, AClientCertificateGoesAsModSslNamesIt) {
  ParsedRequest r("GET / HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_EQ(r.status, http::ParseStatus::kComplete);
  CgiContext cgi = context();
  cgi.https = true;
  EXPECT_EQ(write(r.request, cgi).get("SSL_CLIENT_VERIFY"), std::nullopt);
  net::PeerCertificate peer;
  cgi.client_certificate = &peer;
  EXPECT_EQ(write(r.request, cgi).get("SSL_CLIENT_VERIFY"), "NONE");
  EXPECT_EQ(write(r.request, cgi).get("SSL_CLIENT_S_DN"), std::nullopt);
  peer.verify = "FAILED:certificate revoked";
  peer.subject = "CN=bob";
  peer.issuer = "CN=CA";
  peer.serial = "1001";
  peer.fingerprint = "00ff";
  const auto params = write(r.request, cgi);
  EXPECT_EQ(params.get("SSL_CLIENT_VERIFY"), "FAILED:certificate revoked");
  EXPECT_EQ(params.get("SSL_CLIENT_S_DN"), "CN=bob");
  EXPECT_EQ(params.get("SSL_CLIENT_I_DN"), "CN=CA");
  EXPECT_EQ(params.get("SSL_CLIENT_M_SERIAL"), "1001");
  EXPECT_EQ(params.get("SSL_CLIENT_FINGERPRINT"), "00ff");
}

TEST(CgiParams, HeaderNamesWithDotsOrOtherTokenBytesAreLeftOut) {
  // Each of these would read as HTTP_X_FORWARDED_FOR (or close to it) to an
  // application that looks for the header a proxy sets.
  ParsedRequest r(
      "GET / HTTP/1.1\r\nHost: a\r\nX.Forwarded.For: dots\r\nX~Forwarded~For: tildes\r\n"
      "X-Forwarded+For: plus\r\nX-Real-IP: kept\r\n\r\n");
  ASSERT_EQ(r.status, http::ParseStatus::kComplete);
  Params p = write(r.request, context());
  EXPECT_EQ(p.get("HTTP_X_FORWARDED_FOR"), std::nullopt);
  EXPECT_EQ(p.get("HTTP_X_REAL_IP"), "kept");
  for (const auto& [name, value] : p.pairs) {
    for (char c : name) {
      const bool ok = (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
      EXPECT_TRUE(ok) << name;
    }
  }
}

TEST(CgiParams, Http10AndIpv6AddressesAreWrittenAsSuch) {
  ParsedRequest r("HEAD /index.php HTTP/1.0\r\n\r\n");
  ASSERT_EQ(r.status, http::ParseStatus::kComplete);
  CgiContext cgi = context();
  cgi.server_address = *net::InetAddress::parse("[::1]:443");
  cgi.remote_address = *net::InetAddress::parse("[2001:db8::5]:40000");
  Params p = write(r.request, cgi);
  EXPECT_EQ(p.get("SERVER_PROTOCOL"), "HTTP/1.0");
  EXPECT_EQ(p.get("REQUEST_METHOD"), "HEAD");
  EXPECT_EQ(p.get("QUERY_STRING"), "");
  EXPECT_EQ(p.get("SERVER_ADDR"), "::1");
  EXPECT_EQ(p.get("SERVER_PORT"), "443");
  EXPECT_EQ(p.get("REMOTE_ADDR"), "2001:db8::5");
  EXPECT_EQ(p.get("REMOTE_PORT"), "40000");
  EXPECT_EQ(p.get("HTTP_HOST"), std::nullopt);
}

TEST(CgiParams, HeadersBecomeUpperCaseHttpVariables) {
  ParsedRequest r(
      "GET / HTTP/1.1\r\nHost: a\r\nUser-Agent: curl/8.5\r\naccept: */*\r\n"
      "X-Forwarded-For: 1.2.3.4\r\nx-CuStOm-2: v  w\r\nX-Empty:\r\nDNT: 1\r\n\r\n");
  ASSERT_EQ(r.status, http::ParseStatus::kComplete);
  Params p = write(r.request, context());
  EXPECT_EQ(p.get("HTTP_HOST"), "a");
  EXPECT_EQ(p.get("HTTP_USER_AGENT"), "curl/8.5");
  EXPECT_EQ(p.get("HTTP_ACCEPT"), "*/*");
  EXPECT_EQ(p.get("HTTP_X_FORWARDED_FOR"), "1.2.3.4");
  EXPECT_EQ(p.get("HTTP_X_CUSTOM_2"), "v  w");
  EXPECT_EQ(p.get("HTTP_X_EMPTY"), "");
  EXPECT_EQ(p.get("HTTP_DNT"), "1");
  for (const auto& [name, value] : p.pairs) {
    for (char c : name) {
      EXPECT_FALSE(c >= 'a' && c <= 'z') << name << " has lower case";
      EXPECT_NE(c, '-') << name;
    }
  }
}

TEST(CgiParams, HeadersWithUnderscoresAndProxyAreLeftOut) {
  ParsedRequest r(
      "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: real\r\nX_Forwarded_For: spoofed\r\n"
      "Proxy: http://evil:3128\r\nproxy: http://evil2\r\nMy_Header: x\r\n"
      "Proxy-Authorization: Basic eA==\r\n\r\n");
  ASSERT_EQ(r.status, http::ParseStatus::kComplete);
  Params p = write(r.request, context());
  EXPECT_EQ(p.count("HTTP_X_FORWARDED_FOR"), 1u);
  EXPECT_EQ(p.get("HTTP_X_FORWARDED_FOR"), "real");
  EXPECT_EQ(p.count("HTTP_PROXY"), 0u) << "httpoxy";
  EXPECT_EQ(p.count("HTTP_MY_HEADER"), 0u);
  // Only the exact name "Proxy" is dangerous (it becomes HTTP_PROXY).
  EXPECT_EQ(p.get("HTTP_PROXY_AUTHORIZATION"), "Basic eA==");
  for (const auto& [name, value] : p.pairs) {
    EXPECT_NE(value, "spoofed") << name;
    EXPECT_NE(value, "http://evil:3128") << name;
    EXPECT_NE(value, "http://evil2") << name;
  }
}

TEST(CgiParams, ContentLengthComesFromTheRequestOrTheOverride) {
  ParsedRequest post(
      "POST /form.php HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\n"
      "Content-Length: 42\r\n\r\n");
  ASSERT_EQ(post.status, http::ParseStatus::kComplete);
  Params p = write(post.request, context());
  EXPECT_EQ(p.get("REQUEST_METHOD"), "POST");
  EXPECT_EQ(p.get("CONTENT_LENGTH"), "42");
  EXPECT_EQ(p.get("CONTENT_TYPE"), "application/x-www-form-urlencoded");
  EXPECT_EQ(write(post.request, context(), 7).get("CONTENT_LENGTH"), "7") << "the override wins";
  EXPECT_EQ(write(post.request, context(), 0).get("CONTENT_LENGTH"), "0");

  ParsedRequest chunked(
      "POST /upload.php HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
  ASSERT_EQ(chunked.status, http::ParseStatus::kComplete);
  EXPECT_EQ(write(chunked.request, context()).get("CONTENT_LENGTH"), "");
  EXPECT_EQ(write(chunked.request, context(), 1234567890123ull).get("CONTENT_LENGTH"), "1234567890123");
}

TEST(CgiParams, RequestMethodIsTheRequestsOrTheCachesOverride) {
  // A cache that fills an entry from a HEAD asks the script for a GET.
  ParsedRequest head("HEAD /page.php HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_EQ(head.status, http::ParseStatus::kComplete);
  EXPECT_EQ(write(head.request, context()).get("REQUEST_METHOD"), "HEAD");
  CgiContext as_get = context();
  as_get.method = "GET";
  EXPECT_EQ(write(head.request, as_get).get("REQUEST_METHOD"), "GET");
}

TEST(CgiParams, LongValuesSpanSeveralRecords) {
  const std::string long_value(70000, 'v');
  const std::string text = "GET / HTTP/1.1\r\nHost: a\r\nX-Long: " + std::string(4000, 'h') + "\r\n\r\n";
  ParsedRequest r(text);
  ASSERT_EQ(r.status, http::ParseStatus::kComplete);
  CgiContext cgi = context();
  cgi.document_root = long_value;
  cgi.path_info = std::string_view(long_value).substr(0, 200);  // a 4-byte length
  Params p = write(r.request, cgi);
  EXPECT_EQ(p.get("DOCUMENT_ROOT"), long_value);
  EXPECT_EQ(p.get("PATH_INFO"), std::string(200, 'v'));
  EXPECT_EQ(p.get("HTTP_X_LONG"), std::string(4000, 'h'));
  EXPECT_EQ(p.get("SERVER_NAME"), "example.com") << "a pair after the long one";
}

}  // namespace
}  // namespace tern::fastcgi
