#include "net/inet_address.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace tern::net {
namespace {

TEST(InetAddress, DefaultIsIpv4AnyPortZero) {
  InetAddress a;
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_FALSE(a.is_ipv6());
  EXPECT_EQ(a.to_ip_port(), "0.0.0.0:0");
  EXPECT_EQ(a.socklen(), sizeof(sockaddr_in));
}

TEST(InetAddress, PortConstructorsPickAnyOrLoopback) {
  EXPECT_EQ(InetAddress(80).to_ip_port(), "0.0.0.0:80");
  EXPECT_EQ(InetAddress(80, true).to_ip_port(), "127.0.0.1:80");
  EXPECT_EQ(InetAddress(80, false, true).to_ip_port(), "[::]:80");
  EXPECT_EQ(InetAddress(80, true, true).to_ip_port(), "[::1]:80");
  EXPECT_EQ(InetAddress(80, true, true).socklen(), sizeof(sockaddr_in6));
}

TEST(InetAddress, ParsesIpv4WithPort) {
  auto a = InetAddress::parse("127.0.0.1:80");
  ASSERT_TRUE(a.ok()) << a.error().message();
  EXPECT_EQ(a->family(), AF_INET);
  EXPECT_EQ(a->port(), 80);
  EXPECT_EQ(a->to_ip(), "127.0.0.1");
  EXPECT_EQ(*a, InetAddress(80, true));
}

TEST(InetAddress, ParsesBracketedIpv6WithPort) {
  auto a = InetAddress::parse("[::1]:8080");
  ASSERT_TRUE(a.ok()) << a.error().message();
  EXPECT_TRUE(a->is_ipv6());
  EXPECT_EQ(a->port(), 8080);
  EXPECT_EQ(a->to_ip(), "::1");
  EXPECT_EQ(*a, InetAddress(8080, true, true));
}

TEST(InetAddress, StarAndEmptyHostMeanIpv4Any) {
  auto star = InetAddress::parse("*:80");
  ASSERT_TRUE(star.ok());
  EXPECT_EQ(*star, InetAddress(80));
  auto empty = InetAddress::parse(":80");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, InetAddress(80));
  EXPECT_FALSE(empty->is_ipv6());
}

TEST(InetAddress, ParsesPortBounds) {
  auto low = InetAddress::parse("10.0.0.1:0");
  ASSERT_TRUE(low.ok());
  EXPECT_EQ(low->port(), 0);
  auto high = InetAddress::parse("10.0.0.1:65535");
  ASSERT_TRUE(high.ok());
  EXPECT_EQ(high->port(), 65535);
}

TEST(InetAddress, ParseRejectsMalformedInput) {
  const char* bad[] = {
      "1.2.3.4",        // no port
      "1.2.3.4:",       // empty port
      "1.2.3.4:70000",  // port out of range
      "1.2.3.4:65536",  // just out of range
      "1.2.3.4:99999999999999999999",  // overflows the integer
      "[::1]80",        // no colon after the bracket
      "[::1]",          // no port at all
      "[::1]:",         // empty port
      "[::1:80",        // unclosed bracket
      "::1:80",         // IPv6 without brackets
      "host:80",        // names are not resolved
      "1.2.3.4:8x",     // trailing junk in the port
      "1.2.3.4:-1",     // sign
      "1.2.3.4: 80",    // space
      "1.2.3.256:80",   // octet out of range
      "",               //
      ":",              //
  };
  for (const char* text : bad) {
    auto r = InetAddress::parse(text);
    EXPECT_FALSE(r.ok()) << '"' << text << "\" parsed as " << r->to_ip_port();
    if (!r.ok()) {
      EXPECT_EQ(r.error().code, EINVAL) << text;
    }
  }
}

// BUG (src/net/inet_address.cc, parse()): the bracketed branch hands whatever
// is inside the brackets to the same host handling as the unbracketed one, so
// "[]:80" and "[*]:80" become 0.0.0.0:80 (IPv4 any, from IPv6 syntax) and
// "[1.2.3.4]:80" becomes an IPv4 address. Brackets should require an IPv6
// literal. Disabled until fixed.
TEST(InetAddress, ParseRequiresIpv6LiteralInsideBrackets) {
  for (const char* text : {"[]:80", "[*]:80", "[1.2.3.4]:80"}) {
    auto r = InetAddress::parse(text);
    EXPECT_FALSE(r.ok()) << '"' << text << "\" parsed as " << r->to_ip_port();
  }
}

TEST(InetAddress, FromIpPortAcceptsBothFamilies) {
  auto v4 = InetAddress::from_ip_port("192.168.1.20", 443);
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->to_ip_port(), "192.168.1.20:443");
  auto v6 = InetAddress::from_ip_port("2001:db8::42", 443);
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->to_ip_port(), "[2001:db8::42]:443");
}

TEST(InetAddress, FromIpPortRejectsNamesAndEmptyAndOverlongInput) {
  EXPECT_FALSE(InetAddress::from_ip_port("localhost", 80).ok());
  EXPECT_FALSE(InetAddress::from_ip_port("", 80).ok());
  EXPECT_FALSE(InetAddress::from_ip_port(std::string(100, '1'), 80).ok());
}

TEST(InetAddress, ToIpPortRoundTripsThroughParse) {
  const char* texts[] = {"127.0.0.1:80",   "0.0.0.0:0",         "255.255.255.255:65535",
                         "[::1]:8080",     "[::]:1",            "[2001:db8::1:0:0:1]:443",
                         "[fe80::1]:22",   "[::ffff:1.2.3.4]:9"};
  for (const char* text : texts) {
    auto a = InetAddress::parse(text);
    ASSERT_TRUE(a.ok()) << text;
    EXPECT_EQ(a->to_ip_port(), text);
    auto again = InetAddress::parse(a->to_ip_port());
    ASSERT_TRUE(again.ok()) << text;
    EXPECT_EQ(*again, *a) << text;
  }
}

TEST(InetAddress, LoopbackIsAll127AndIpv6OneAndTheirMappedForms) {
  for (const char* text : {"127.0.0.1:1", "127.255.0.9:1", "[::1]:1", "[::ffff:127.0.0.2]:1"}) {
    EXPECT_TRUE(InetAddress::parse(text)->is_loopback()) << text;
  }
  for (const char* text : {"128.0.0.1:1", "10.0.0.1:1", "0.0.0.0:1", "[::2]:1", "[::]:1",
                           "[::ffff:10.0.0.1]:1", "[::127.0.0.1]:1"}) {
    EXPECT_FALSE(InetAddress::parse(text)->is_loopback()) << text;
  }
}

TEST(InetAddress, SameIpIgnoresThePortAndTheIpv4MappedForm) {
  auto a = InetAddress::parse("192.0.2.7:80").value();
  EXPECT_TRUE(a.same_ip(InetAddress::parse("192.0.2.7:5000").value()));
  EXPECT_TRUE(a.same_ip(InetAddress::parse("[::ffff:192.0.2.7]:1").value()));
  EXPECT_TRUE(InetAddress::parse("[::ffff:192.0.2.7]:1")->same_ip(a));
  EXPECT_FALSE(a.same_ip(InetAddress::parse("192.0.2.8:80").value()));
  EXPECT_FALSE(a.same_ip(InetAddress::parse("[2001:db8::7]:80").value()));
  auto v6 = InetAddress::parse("[2001:db8::7]:80").value();
  EXPECT_TRUE(v6.same_ip(InetAddress::parse("[2001:db8::7]:443").value()));
  EXPECT_FALSE(v6.same_ip(InetAddress::parse("[2001:db8::8]:80").value()));
}

TEST(InetAddress, EqualityComparesFamilyAddressAndPort) {
  auto a = InetAddress::parse("10.0.0.1:80").value();
  EXPECT_EQ(a, InetAddress::parse("10.0.0.1:80").value());
  EXPECT_NE(a, InetAddress::parse("10.0.0.1:81").value());
  EXPECT_NE(a, InetAddress::parse("10.0.0.2:80").value());
  // The same "any" address in two families is not equal.
  EXPECT_NE(InetAddress(80), InetAddress(80, false, true));
  auto b = InetAddress::parse("[::1]:80").value();
  EXPECT_EQ(b, InetAddress::parse("[0:0:0:0:0:0:0:1]:80").value());
  EXPECT_NE(b, InetAddress::parse("[::2]:80").value());
}

TEST(InetAddress, SetPortChangesOnlyThePort) {
  auto v4 = InetAddress::parse("10.1.2.3:80").value();
  v4.set_port(8443);
  EXPECT_EQ(v4.to_ip_port(), "10.1.2.3:8443");
  auto v6 = InetAddress::parse("[::1]:80").value();
  v6.set_port(8443);
  EXPECT_EQ(v6.to_ip_port(), "[::1]:8443");
}

TEST(InetAddress, FromSockaddrReadsIpv4Storage) {
  sockaddr_storage storage{};
  auto* sin = reinterpret_cast<sockaddr_in*>(&storage);
  sin->sin_family = AF_INET;
  sin->sin_port = htons(1234);
  ASSERT_EQ(inet_pton(AF_INET, "10.9.8.7", &sin->sin_addr), 1);
  InetAddress a = InetAddress::from_sockaddr(storage);
  EXPECT_EQ(a.to_ip_port(), "10.9.8.7:1234");
  EXPECT_EQ(a.socklen(), sizeof(sockaddr_in));
}

TEST(InetAddress, FromSockaddrReadsIpv6Storage) {
  sockaddr_storage storage{};
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(&storage);
  sin6->sin6_family = AF_INET6;
  sin6->sin6_port = htons(4321);
  ASSERT_EQ(inet_pton(AF_INET6, "2001:db8::7", &sin6->sin6_addr), 1);
  InetAddress a = InetAddress::from_sockaddr(storage);
  EXPECT_TRUE(a.is_ipv6());
  EXPECT_EQ(a.to_ip_port(), "[2001:db8::7]:4321");
  EXPECT_EQ(a.socklen(), sizeof(sockaddr_in6));
}

TEST(InetAddress, SockaddrPointerMatchesTheStoredAddress) {
  auto a = InetAddress::parse("127.0.0.1:5555").value();
  const auto* sin = reinterpret_cast<const sockaddr_in*>(a.sockaddr_ptr());
  EXPECT_EQ(sin->sin_family, AF_INET);
  EXPECT_EQ(ntohs(sin->sin_port), 5555);
  EXPECT_EQ(ntohl(sin->sin_addr.s_addr), INADDR_LOOPBACK);
}

}  // namespace
}  // namespace tern::net

namespace tern::net {
namespace {

// to_ip writes IPv4 by hand: every byte width, as inet_ntop would.
TEST(InetAddressText, Ipv4DigitsOfEveryWidth) {
  for (const char* ip : {"0.0.0.0", "1.2.3.4", "10.99.100.255", "192.168.1.10", "255.255.255.255", "9.90.199.200"}) {
    auto address = InetAddress::from_ip_port(ip, 80);
    ASSERT_TRUE(address) << ip;
    EXPECT_EQ(address->to_ip(), ip);
    char expected[INET_ADDRSTRLEN];
    const sockaddr_in* raw = reinterpret_cast<const sockaddr_in*>(address->sockaddr_ptr());
    inet_ntop(AF_INET, &raw->sin_addr, expected, sizeof expected);
    EXPECT_EQ(address->to_ip(), expected);
  }
}

}  // namespace
}  // namespace tern::net
