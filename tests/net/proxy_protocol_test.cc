#include "net/proxy_protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace tern::net {
namespace {

using namespace std::string_literals;

const std::string kSignature("\r\n\r\n\0\r\nQUIT\n", 12);

// What a connection holding `bytes` sees when they arrive one byte at a
// time: every proper prefix of a valid header is incomplete, and the whole
// gives the same answer as at once.
ProxyParseResult parse_byte_by_byte(std::string_view bytes) {
  for (size_t n = 1; n < bytes.size(); ++n) {
    const ProxyParseResult r = parse_proxy_header(bytes.substr(0, n));
    if (r.status != ProxyParse::kIncomplete) return r;
  }
  return parse_proxy_header(bytes);
}

std::string v2(unsigned char version_command, unsigned char family, std::string block) {
  std::string out = kSignature;
  out.push_back(static_cast<char>(version_command));
  out.push_back(static_cast<char>(family));
  out.push_back(static_cast<char>(block.size() >> 8));
  out.push_back(static_cast<char>(block.size() & 0xff));
  return out + block;
}

// Two IPv4 addresses and ports: 203.0.113.7:51234 to 10.0.0.2:443.
const std::string kInetBlock = "\xcb\x00\x71\x07\x0a\x00\x00\x02\xc8\x22\x01\xbb"s;

TEST(ProxyProtocol, ReadsVersion1Tcp4AndLeavesWhatFollows) {
  const std::string bytes = "PROXY TCP4 203.0.113.7 10.0.0.2 51234 443\r\nGET / HTTP/1.1\r\n";
  const ProxyParseResult r = parse_proxy_header(bytes);
  ASSERT_EQ(r.status, ProxyParse::kDone) << r.error;
  EXPECT_EQ(r.size, bytes.find("GET"));
  EXPECT_FALSE(r.header.local);
  EXPECT_EQ(r.header.version, 1);
  EXPECT_EQ(r.header.source.to_ip_port(), "203.0.113.7:51234");
  EXPECT_EQ(r.header.destination.to_ip_port(), "10.0.0.2:443");
}

TEST(ProxyProtocol, ReadsVersion1Tcp6) {
  const ProxyParseResult r = parse_proxy_header("PROXY TCP6 2001:db8::7 2001:db8::1 1 65535\r\n");
  ASSERT_EQ(r.status, ProxyParse::kDone) << r.error;
  EXPECT_EQ(r.header.source.to_ip_port(), "[2001:db8::7]:1");
  EXPECT_EQ(r.header.destination.to_ip_port(), "[2001:db8::1]:65535");
}

TEST(ProxyProtocol, Version1UnknownKeepsTheConnectionsAddresses) {
  for (const char* header : {"PROXY UNKNOWN\r\n", "PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n"}) {
    const ProxyParseResult r = parse_proxy_header(header);
    ASSERT_EQ(r.status, ProxyParse::kDone) << header;
    EXPECT_TRUE(r.header.local);
    EXPECT_EQ(r.size, std::string_view(header).size());
  }
}

TEST(ProxyProtocol, EveryPrefixOfAValidHeaderIsIncomplete) {
  const std::string headers[] = {
      "PROXY TCP4 203.0.113.7 10.0.0.2 51234 443\r\n",
      "PROXY TCP6 2001:db8::7 2001:db8::1 1 65535\r\n",
      v2(0x21, 0x11, kInetBlock),
      v2(0x20, 0x00, ""),
      v2(0x21, 0x11, kInetBlock + "\x04\x00\x02" "ab"s),  // a NOOP TLV
  };
  for (const std::string& header : headers) {
    const ProxyParseResult r = parse_byte_by_byte(header);
    ASSERT_EQ(r.status, ProxyParse::kDone) << r.error;
    EXPECT_EQ(r.size, header.size());
  }
}

TEST(ProxyProtocol, RefusesMalformedVersion1AtTheFirstByteThatShowsIt) {
  const std::pair<std::string, size_t> cases[] = {
      // The bytes, and how many are needed to tell.
      {"GET / HTTP/1.1\r\n", 1},
      {"PROXYTCP4", 6},
      {"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n", 32},
      {"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", 30},
      {"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", 34},
      {"PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n", 33},
      {"PROXY TCP4 1.2.3.4 5.6.7.8 1 65536\r\n", 36},
      {"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n", 33},
      {"PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n", 33},
      {"PROXY TCP4 2001:db8::1 5.6.7.8 1 2\r\n", 36},
      {"PROXY TCP6 1.2.3.4 2001:db8::1 1 2\r\n", 36},
      {"PROXY TCP4 1.2.3.400 5.6.7.8 1 2\r\n", 34},
      {"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", 31},
      {"PROXY TCP4 1.2.3.4\r5.6.7.8 1 2\r\n", 20},
  };
  for (const auto& [bytes, needed] : cases) {
    for (size_t n = 1; n < needed; ++n) {
      EXPECT_EQ(parse_proxy_header(std::string_view(bytes).substr(0, n)).status, ProxyParse::kIncomplete)
          << bytes << " cut at " << n;
    }
    const ProxyParseResult r = parse_proxy_header(std::string_view(bytes).substr(0, needed));
    EXPECT_EQ(r.status, ProxyParse::kInvalid) << bytes;
    EXPECT_STRNE(r.error, "") << bytes;
  }
}

TEST(ProxyProtocol, Version1WithoutItsEndWithin107BytesIsRefused) {
  std::string bytes = "PROXY UNKNOWN " + std::string(92, 'x');
  ASSERT_EQ(bytes.size(), 106u);
  EXPECT_EQ(parse_proxy_header(bytes).status, ProxyParse::kIncomplete);
  EXPECT_EQ(parse_proxy_header(bytes + "\r").status, ProxyParse::kInvalid);
  // 105 bytes and CRLF: the longest there may be.
  bytes.pop_back();
  EXPECT_EQ(parse_proxy_header(bytes + "\r\n").status, ProxyParse::kDone);
}

TEST(ProxyProtocol, ReadsVersion2Inet) {
  const std::string header = v2(0x21, 0x11, kInetBlock);
  const ProxyParseResult r = parse_proxy_header(header + "rest");
  ASSERT_EQ(r.status, ProxyParse::kDone) << r.error;
  EXPECT_EQ(r.size, header.size());
  EXPECT_EQ(r.header.version, 2);
  EXPECT_FALSE(r.header.local);
  EXPECT_EQ(r.header.source.to_ip_port(), "203.0.113.7:51234");
  EXPECT_EQ(r.header.destination.to_ip_port(), "10.0.0.2:443");
}

TEST(ProxyProtocol, ReadsVersion2Inet6WithTlvs) {
  std::string block(36, '\0');
  block[0] = '\x20';
  block[1] = '\x01';
  block[2] = '\x0d';
  block[3] = '\xb8';
  block[15] = '\x07';  // 2001:db8::7
  block[16] = '\x20';
  block[17] = '\x01';
  block[18] = '\x0d';
  block[19] = '\xb8';
  block[31] = '\x01';  // 2001:db8::1
  block[32] = '\x00';
  block[33] = '\x50';  // 80
  block[34] = '\x01';
  block[35] = '\xbb';  // 443
  block += "\x01\x00\x02h2"s;                  // ALPN
  block += "\x02\x00\x0b" "example.org"s;      // authority
  const ProxyParseResult r = parse_proxy_header(v2(0x21, 0x21, block));
  ASSERT_EQ(r.status, ProxyParse::kDone) << r.error;
  EXPECT_EQ(r.header.source.to_ip_port(), "[2001:db8::7]:80");
  EXPECT_EQ(r.header.destination.to_ip_port(), "[2001:db8::1]:443");
}

TEST(ProxyProtocol, Version2LocalUnspecAndUnixKeepTheConnectionsAddresses) {
  for (const std::string& header :
       {v2(0x20, 0x11, kInetBlock), v2(0x21, 0x00, ""), v2(0x21, 0x31, std::string(216, 'a'))}) {
    const ProxyParseResult r = parse_proxy_header(header);
    ASSERT_EQ(r.status, ProxyParse::kDone) << r.error;
    EXPECT_TRUE(r.header.local);
    EXPECT_EQ(r.size, header.size());
  }
}

TEST(ProxyProtocol, RefusesMalformedVersion2) {
  const std::string cases[] = {
      v2(0x11, 0x11, kInetBlock),                          // version 1 in the nibble
      v2(0x22, 0x11, kInetBlock),                          // command 2
      v2(0x21, 0x41, kInetBlock),                          // family 4
      v2(0x21, 0x13, kInetBlock),                          // transport 3
      v2(0x21, 0x11, kInetBlock.substr(0, 11)),            // short of its addresses
      v2(0x21, 0x21, kInetBlock),                          // INET6 needs 36 bytes
      v2(0x21, 0x11, kInetBlock + "\x04\x00"s),            // a TLV cut short
      v2(0x21, 0x11, kInetBlock + "\x04\x00\x05" "ab"s),   // a TLV past the end
  };
  for (const std::string& header : cases) {
    const ProxyParseResult r = parse_byte_by_byte(header);
    EXPECT_EQ(r.status, ProxyParse::kInvalid) << testing::PrintToString(header);
  }
}

TEST(ProxyProtocol, Version2IsRefusedOnItsLengthBeforeItsBytesCome) {
  // A length past the bound is known from the 16 fixed bytes: nothing
  // more is read waiting for the rest.
  std::string header = kSignature + "\x21\x11\x10\x00"s;  // 4096 bytes of block
  EXPECT_EQ(parse_proxy_header(header.substr(0, 15)).status, ProxyParse::kIncomplete);
  EXPECT_EQ(parse_proxy_header(header).status, ProxyParse::kInvalid);
  // The largest block allowed: 4080 bytes.
  std::string block = kInetBlock + "\x04"s;
  const size_t value = kMaxProxyHeader - 16 - kInetBlock.size() - 3;
  block.push_back(static_cast<char>(value >> 8));
  block.push_back(static_cast<char>(value & 0xff));
  block += std::string(value, 'x');
  const std::string largest = v2(0x21, 0x11, block);
  ASSERT_EQ(largest.size(), kMaxProxyHeader);
  EXPECT_EQ(parse_proxy_header(largest).status, ProxyParse::kDone);
}

TEST(ProxyProtocol, WritesHeadersItReadsBack) {
  const InetAddress source = *InetAddress::parse("203.0.113.7:51234");
  const InetAddress destination = *InetAddress::parse("10.0.0.2:443");
  EXPECT_EQ(proxy_header_v1(source, destination), "PROXY TCP4 203.0.113.7 10.0.0.2 51234 443\r\n");
  EXPECT_EQ(proxy_header_v2(source, destination), v2(0x21, 0x11, kInetBlock));
  const InetAddress source6 = *InetAddress::parse("[2001:db8::7]:80");
  const InetAddress destination6 = *InetAddress::parse("[2001:db8::1]:443");
  for (const std::string& header : {proxy_header_v1(source6, destination6), proxy_header_v2(source6, destination6)}) {
    const ProxyParseResult r = parse_proxy_header(header);
    ASSERT_EQ(r.status, ProxyParse::kDone) << r.error;
    EXPECT_EQ(r.size, header.size());
    EXPECT_EQ(r.header.source, source6);
    EXPECT_EQ(r.header.destination, destination6);
  }
  // Addresses of two families cannot be named together.
  EXPECT_EQ(proxy_header_v1(source, destination6), "PROXY UNKNOWN\r\n");
  EXPECT_TRUE(parse_proxy_header(proxy_header_v2(source, destination6)).header.local);
}

}  // namespace
}  // namespace tern::net
