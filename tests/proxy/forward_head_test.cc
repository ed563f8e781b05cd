// The head a request is forwarded with: what is dropped, replaced and
// appended, checked on the bytes written.
#include "proxy/forward_head.h"

#include <gtest/gtest.h>

#include <string>

#include "http1/request_parser.h"
#include "net/buffer.h"
#include "net/inet_address.h"
#include "net/secure_layer.h"

namespace tern::proxy {
namespace {

ForwardOptions with(void (*set)(ForwardOptions&)) {
  ForwardOptions options;
  set(options);
  return options;
}

// The forwarded head of `raw` (a complete request head).
std::string forward(const std::string& raw, ForwardOptions options, const net::InetAddress& client) {
  http::RequestParser parser;
  http::Request request;
  EXPECT_EQ(parser.parse(raw, &request), http::ParseStatus::kComplete) << parser.error_reason();
  if (options.target.empty()) options.target = request.target();
  options.client = &client;
  net::Buffer out;
  write_forward_head(request, options, out);
  return std::string(out.view());
}

const net::InetAddress kClient = *net::InetAddress::from_ip_port("192.0.2.7", 51000);

TEST(ForwardHeadTest, HopByHopFieldsStayBehindAndTheRestGoesOnInOrder) {
  const std::string head = forward(
      "POST /api?x=1 HTTP/1.1\r\nHost: shop.test\r\nConnection: keep-alive, X-Secret\r\n"
      "Keep-Alive: timeout=5\r\nX-Secret: 1\r\nTE: trailers\r\nAccept: */*\r\n"
      "Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 7\r\n"
      "Proxy-Connection: keep-alive\r\nCookie: a=b\r\n\r\n",
      with([](ForwardOptions& o) { o.content_length = 7; }), kClient);
  EXPECT_TRUE(head.starts_with("POST /api?x=1 HTTP/1.1\r\nHost: shop.test\r\nAccept: */*\r\n"
                               "Content-Type: application/json\r\nCookie: a=b\r\n"))
      << head;
  for (const char* gone : {"Connection", "Keep-Alive", "X-Secret", "TE:", "Expect", "Proxy-Connection"}) {
    EXPECT_EQ(head.find(gone), std::string::npos) << gone << " in\n" << head;
  }
  EXPECT_NE(head.find("\r\nContent-Length: 7\r\n"), std::string::npos);
  EXPECT_TRUE(head.ends_with("\r\n\r\n"));
}

TEST(ForwardHeadTest, ProxyFieldsAreForThisHopAndStayBehind) {
  // A credential the client meant for a proxy (us) is not the application's.
  const std::string head = forward(
      "GET / HTTP/1.1\r\nHost: shop.test\r\nProxy-Authorization: Basic dXNlcjpwYXNz\r\n"
      "proxy-authorization: Basic eA==\r\nProxy-Foo: 1\r\nX-Proxy: kept\r\n\r\n",
      ForwardOptions{}, kClient);
  EXPECT_EQ(head.find("dXNlcjpwYXNz"), std::string::npos) << head;
  EXPECT_EQ(head.find("eA=="), std::string::npos) << head;
  EXPECT_EQ(head.find("Proxy-Foo"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nX-Proxy: kept\r\n"), std::string::npos) << head;
}

TEST(ForwardHeadTest, ARequestWithoutAHostGetsTheUpstreamsName) {
  // HTTP/1.0 needs no Host; the upstream (HTTP/1.1) must get one.
  const std::string head = forward("GET /x HTTP/1.0\r\n\r\n",
                                   with([](ForwardOptions& o) { o.upstream_host = "app:3000"; }), kClient);
  EXPECT_TRUE(head.starts_with("GET /x HTTP/1.1\r\nHost: app:3000\r\n")) << head;
  // A client's Host wins over it, and the location's over both.
  const std::string client = forward("GET /x HTTP/1.0\r\nHost: shop.test\r\n\r\n",
                                     with([](ForwardOptions& o) { o.upstream_host = "app:3000"; }), kClient);
  EXPECT_TRUE(client.starts_with("GET /x HTTP/1.1\r\nHost: shop.test\r\n")) << client;
}

TEST(ForwardHeadTest, TheClientsAddressIsAppendedAndClaimsAreReplaced) {
  const std::string head = forward(
      "GET / HTTP/1.1\r\nHost: shop.test\r\nX-Forwarded-For: 203.0.113.9\r\nX-Real-IP: 10.0.0.1\r\n"
      "X-Forwarded-Proto: https\r\nForwarded: for=203.0.113.9\r\nVia: 1.1 cdn\r\n\r\n",
      ForwardOptions{}, kClient);
  EXPECT_NE(head.find("\r\nX-Real-IP: 192.0.2.7\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("10.0.0.1"), std::string::npos);
  EXPECT_NE(head.find("\r\nX-Forwarded-For: 203.0.113.9, 192.0.2.7\r\n"), std::string::npos);
  EXPECT_NE(head.find("\r\nX-Forwarded-Proto: http\r\n"), std::string::npos);
  EXPECT_EQ(head.find("X-Forwarded-Proto: https"), std::string::npos);
  EXPECT_NE(head.find("\r\nX-Forwarded-Host: shop.test\r\n"), std::string::npos);
  EXPECT_NE(head.find("\r\nForwarded: for=203.0.113.9, for=192.0.2.7;proto=http;host=\"shop.test\"\r\n"),
            std::string::npos);
  EXPECT_NE(head.find("\r\nVia: 1.1 cdn, 1.1 tern\r\n"), std::string::npos);
}

// Behind a trusted proxy (real_ip): X-Real-IP names the client it found,
// the lists gain the address the request came from, the proxy's.
TEST(ForwardHeadTest, BehindATrustedProxyTheListsGainTheHopAndXRealIpTheClient) {
  const net::InetAddress hop = *net::InetAddress::from_ip_port("10.0.0.5", 40000);
  ForwardOptions options;
  options.hop = &hop;
  const std::string head = forward("GET / HTTP/1.1\r\nHost: shop.test\r\nX-Forwarded-For: 192.0.2.7\r\n\r\n",
                                   options, kClient);
  EXPECT_NE(head.find("\r\nX-Real-IP: 192.0.2.7\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nX-Forwarded-For: 192.0.2.7, 10.0.0.5\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nForwarded: for=10.0.0.5;proto=http;host=\"shop.test\"\r\n"), std::string::npos) << head;
}

// A location's set_headers replace the client's and tern's own fields of
// their names (an empty one sends none); remove_headers take fields out.
TEST(ForwardHeadTest, TheLocationsEditsReplaceAndRemoveFields) {
  FieldEdits edits;
  edits.set = {{"X-Forwarded-Proto", "https"}, {"X-Tenant", "blue"}, {"X-Debug", ""}};
  edits.remove = {"Cookie", "x-request-id", "Via"};
  ForwardOptions options;
  options.edits = &edits;
  const std::string head = forward(
      "GET / HTTP/1.1\r\nHost: shop.test\r\nCookie: a=b\r\nX-Tenant: red\r\nX-Debug: 1\r\nAccept: */*\r\n\r\n",
      options, kClient);
  EXPECT_NE(head.find("\r\nX-Forwarded-Proto: https\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("X-Forwarded-Proto: http\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nX-Tenant: blue\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("red"), std::string::npos) << head;
  EXPECT_EQ(head.find("X-Debug"), std::string::npos) << head;
  EXPECT_EQ(head.find("Cookie"), std::string::npos) << head;
  EXPECT_EQ(head.find("X-Request-Id"), std::string::npos) << head;
  EXPECT_EQ(head.find("Via"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nAccept: */*\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nHost: shop.test\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nX-Real-IP: 192.0.2.7\r\n"), std::string::npos) << head;
}

// A set field whose value names a client certificate's variable sends the
// certificate's: "NONE" where one was asked for and none came, nothing
// for what is empty (a client cannot send its own of that name).
TEST(ForwardHeadTest, SetFieldsMaySendTheClientCertificate) {
  FieldEdits edits;
  edits.set = {{"X-Client-DN", "$ssl_client_s_dn"}, {"X-Client-Verify", "$ssl_client_verify"},
               {"X-Client-Issuer", "$ssl_client_i_dn"}, {"X-Client-Serial", "$ssl_client_serial"},
               {"X-Client-Fingerprint", "$ssl_client_fingerprint"}};
  net::PeerCertificate alice;
  alice.verify = "SUCCESS";
  alice.subject = "O=Example,CN=alice";
  alice.issuer = "CN=CA";
  alice.serial = "1000";
  alice.fingerprint = "ab12";
  const std::string request = "GET / HTTP/1.1\r\nHost: a.test\r\nX-Client-DN: forged\r\n\r\n";
  ForwardOptions options;
  options.edits = &edits;
  options.secure = true;
  options.client_certificate = &alice;
  std::string head = forward(request, options, kClient);
  EXPECT_NE(head.find("\r\nX-Client-DN: O=Example,CN=alice\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nX-Client-Verify: SUCCESS\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nX-Client-Issuer: CN=CA\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nX-Client-Serial: 1000\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nX-Client-Fingerprint: ab12\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("forged"), std::string::npos) << head;

  net::PeerCertificate none;  // asked for, none sent
  options.client_certificate = &none;
  head = forward(request, options, kClient);
  EXPECT_NE(head.find("\r\nX-Client-Verify: NONE\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("X-Client-DN"), std::string::npos) << head;
  EXPECT_EQ(head.find("X-Client-Fingerprint"), std::string::npos) << head;

  options.secure = false;  // plain HTTP: nothing
  options.client_certificate = nullptr;
  head = forward(request, options, kClient);
  EXPECT_EQ(head.find("X-Client-"), std::string::npos) << head;
  EXPECT_TRUE(is_client_certificate_variable("$ssl_client_fingerprint"));
  EXPECT_FALSE(is_client_certificate_variable("$ssl_client_cert"));
}

TEST(ForwardHeadTest, AnIpv6ClientIsQuotedInForwardedAndTlsSaysHttps) {
  const net::InetAddress v6 = *net::InetAddress::from_ip_port("2001:db8::1", 443);
  const std::string head =
      forward("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", with([](ForwardOptions& o) { o.secure = true; }), v6);
  EXPECT_NE(head.find("\r\nForwarded: for=\"[2001:db8::1]\";proto=https;host=\"a.test\"\r\n"),
            std::string::npos)
      << head;
  EXPECT_NE(head.find("\r\nX-Forwarded-Proto: https\r\n"), std::string::npos);
  EXPECT_NE(head.find("\r\nX-Forwarded-For: 2001:db8::1\r\n"), std::string::npos);
}

TEST(ForwardHeadTest, TargetHostAndBodyFramingFollowTheOptions) {
  const std::string head = forward(
      "PUT /app/upload HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n",
      with([](ForwardOptions& o) {
        o.target = "/upload";
        o.host = "backend:3000";
        o.chunked = true;
      }), kClient);
  EXPECT_TRUE(head.starts_with("PUT /upload HTTP/1.1\r\nHost: backend:3000\r\n")) << head;
  EXPECT_NE(head.find("\r\nTransfer-Encoding: chunked\r\n\r\n"), std::string::npos);
  EXPECT_EQ(head.find("Content-Length"), std::string::npos);
  // The original Host still names the site to the application.
  EXPECT_NE(head.find("\r\nX-Forwarded-Host: a.test\r\n"), std::string::npos);
}

TEST(ForwardHeadTest, AnUpgradeKeepsItsUpgradeFieldAndSaysSo) {
  const std::string raw =
      "GET /ws HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  const std::string upgraded = forward(raw, with([](ForwardOptions& o) { o.upgrade = true; }), kClient);
  EXPECT_NE(upgraded.find("\r\nConnection: upgrade\r\nUpgrade: websocket\r\n"), std::string::npos)
      << upgraded;
  EXPECT_NE(upgraded.find("\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"), std::string::npos);
  const std::string plain = forward(raw, ForwardOptions{}, kClient);
  EXPECT_EQ(plain.find("Upgrade"), std::string::npos) << plain;
}

}  // namespace
}  // namespace tern::proxy
