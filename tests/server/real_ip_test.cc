// real_ip: the client a request's trusted proxies name, as nginx's realip
// with real_ip_recursive: X-Forwarded-For walked from its end past trusted
// hops, X-Real-IP, the PROXY header's client; untrusted peers' fields
// ignored.
#include "server/real_ip.h"

#include <gtest/gtest.h>

#include <string>

#include "http1/request_parser.h"

namespace tern::server {
namespace {

net::InetAddress at(std::string_view ip) { return *net::InetAddress::from_ip_port(ip, 40000); }

RealIpConfig trusting(std::initializer_list<const char*> networks,
                      RealIpConfig::Source source = RealIpConfig::Source::kXForwardedFor) {
  RealIpConfig config;
  for (const char* network : networks) config.from.push_back(*Cidr::parse(network));
  config.source = source;
  return config;
}

// The client `fields` name to `config`, for a connection from `peer`.
std::string client(const RealIpConfig& config, const std::string& fields, const char* peer = "10.0.0.5") {
  const std::string raw = "GET / HTTP/1.1\r\nHost: t\r\n" + fields + "\r\n";
  http::RequestParser parser;
  http::Request request;
  EXPECT_EQ(parser.parse(raw, &request), http::ParseStatus::kComplete) << raw;
  return real_client(config, request, at(peer)).to_ip();
}

TEST(RealIp, XForwardedForIsWalkedFromItsEndPastTrustedHops) {
  const RealIpConfig config = trusting({"10.0.0.0/8", "192.0.2.0/24"});
  EXPECT_EQ(client(config, "X-Forwarded-For: 203.0.113.7\r\n"), "203.0.113.7");
  // The client's own claim (198.51.100.1) sits before the first untrusted hop.
  EXPECT_EQ(client(config, "X-Forwarded-For: 198.51.100.1, 203.0.113.7, 192.0.2.9\r\n"), "203.0.113.7");
  // Every hop trusted: the first of the list.
  EXPECT_EQ(client(config, "X-Forwarded-For: 10.1.1.1, 192.0.2.9\r\n"), "10.1.1.1");
  // Several fields are one list, in order.
  EXPECT_EQ(client(config, "X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-For: 192.0.2.9\r\n"), "203.0.113.7");
  EXPECT_EQ(client(config, "X-Forwarded-For: 2001:db8::7 , [2001:db8::8]\r\n"), "2001:db8::8");
  EXPECT_EQ(client(config, "X-Forwarded-For: 203.0.113.7,,\r\n"), "203.0.113.7");
  // No field: the peer.
  EXPECT_EQ(client(config, ""), "10.0.0.5");
}

TEST(RealIp, AnEntryThatIsNoAddressEndsTheWalkWhereItStands) {
  const RealIpConfig config = trusting({"10.0.0.0/8"});
  EXPECT_EQ(client(config, "X-Forwarded-For: unknown\r\n"), "10.0.0.5");
  EXPECT_EQ(client(config, "X-Forwarded-For: 203.0.113.7, 10.2.2.2, _hidden\r\n"), "10.0.0.5");
  EXPECT_EQ(client(config, "X-Forwarded-For: garbage, 10.2.2.2\r\n"), "10.2.2.2");
  EXPECT_EQ(client(config, "X-Forwarded-For: 203.0.113.7:8080\r\n"), "10.0.0.5");
}

TEST(RealIp, WithoutRecursionTheLastEntryIsTheClient) {
  RealIpConfig config = trusting({"10.0.0.0/8"});
  config.recursive = false;
  EXPECT_EQ(client(config, "X-Forwarded-For: 203.0.113.7, 10.2.2.2\r\n"), "10.2.2.2");
}

TEST(RealIp, AnUntrustedPeersFieldsAreIgnored) {
  const RealIpConfig config = trusting({"10.0.0.0/8"});
  EXPECT_EQ(client(config, "X-Forwarded-For: 203.0.113.7\r\n", "198.51.100.20"), "198.51.100.20");
  const RealIpConfig real_ip = trusting({"10.0.0.0/8"}, RealIpConfig::Source::kXRealIp);
  EXPECT_EQ(client(real_ip, "X-Real-IP: 203.0.113.7\r\n", "198.51.100.20"), "198.51.100.20");
}

TEST(RealIp, XRealIpNamesOneAddress) {
  const RealIpConfig config = trusting({"10.0.0.0/8"}, RealIpConfig::Source::kXRealIp);
  EXPECT_EQ(client(config, "X-Real-IP: 203.0.113.7\r\nX-Forwarded-For: 198.51.100.1\r\n"), "203.0.113.7");
  EXPECT_EQ(client(config, "X-Real-IP: nonsense\r\n"), "10.0.0.5");
}

TEST(RealIp, ProxyProtocolReadsNoField) {
  const RealIpConfig config = trusting({"10.0.0.0/8"}, RealIpConfig::Source::kProxyProtocol);
  EXPECT_EQ(client(config, "X-Forwarded-For: 203.0.113.7\r\n"), "10.0.0.5");
}

TEST(RealIp, ForwardedAddressesAreIpsAlone) {
  EXPECT_EQ(parse_forwarded_address(" 203.0.113.7 ")->to_ip(), "203.0.113.7");
  EXPECT_EQ(parse_forwarded_address("[::1]")->to_ip(), "::1");
  EXPECT_FALSE(parse_forwarded_address("[203.0.113.7]"));
  EXPECT_FALSE(parse_forwarded_address("example.com"));
  EXPECT_FALSE(parse_forwarded_address(""));
  EXPECT_FALSE(parse_forwarded_address("1.2.3.4.5"));
}

}  // namespace
}  // namespace tern::server
