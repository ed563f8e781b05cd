#include "net/proxy_protocol.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace tern::net {
namespace {

constexpr std::string_view kV1Prefix = "PROXY ";
constexpr std::string_view kV2Signature{"\r\n\r\n\0\r\nQUIT\n", 12};
constexpr size_t kV2Fixed = 16;  // signature, version and command, family, length
// Address blocks by family: two IPv4 addresses and two ports; two IPv6
// addresses and two ports; two 108-byte socket paths.
constexpr size_t kV2Inet = 12;
constexpr size_t kV2Inet6 = 36;
constexpr size_t kV2Unix = 216;

ProxyParseResult invalid(const char* why) {
  ProxyParseResult r;
  r.status = ProxyParse::kInvalid;
  r.error = why;
  return r;
}

// Whether `bytes` (shorter than `whole` or not) begins as `whole` does.
bool starts_as(std::string_view bytes, std::string_view whole) {
  const size_t n = std::min(bytes.size(), whole.size());
  return bytes.substr(0, n) == whole.substr(0, n);
}

// A decimal port as version 1 writes it: 1 to 5 digits, no sign, no
// leading zero (but "0" itself), at most 65535.
bool parse_port(std::string_view text, uint16_t* port) {
  if (text.empty() || text.size() > 5 || (text.size() > 1 && text.front() == '0')) return false;
  unsigned value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value > 65535) return false;
  *port = static_cast<uint16_t>(value);
  return true;
}

bool parse_address(std::string_view text, bool ipv6, uint16_t port, InetAddress* out) {
  // inet_pton reads a NUL-terminated string; the longest IPv6 form is 45.
  if (text.empty() || text.size() > 45) return false;
  auto address = InetAddress::from_ip_port(text, port);
  if (!address || address->is_ipv6() != ipv6) return false;
  *out = *address;
  return true;
}

// "PROXY TCP4 SRC DST SPORT DPORT\r\n", "PROXY UNKNOWN ...\r\n".
ProxyParseResult parse_v1(std::string_view bytes) {
  const std::string_view head = bytes.substr(0, std::min(bytes.size(), kMaxProxyHeaderV1));
  const size_t lf = head.find('\n');
  if (lf == std::string_view::npos) {
    // A CR may only be the last byte so far (its LF still to come).
    if (const size_t cr = head.find('\r'); cr != std::string_view::npos && cr + 1 < bytes.size()) {
      return invalid("version 1: no CRLF within 107 bytes");
    }
    if (bytes.size() >= kMaxProxyHeaderV1) return invalid("version 1: no CRLF within 107 bytes");
    return ProxyParseResult();
  }
  if (lf == 0 || bytes[lf - 1] != '\r') return invalid("version 1: a line not ended by CRLF");
  std::string_view line = bytes.substr(kV1Prefix.size(), lf - 1 - kV1Prefix.size());
  if (line.find('\r') != std::string_view::npos) return invalid("version 1: a CR inside the line");
  ProxyParseResult r;
  r.status = ProxyParse::kDone;
  r.size = lf + 1;
  r.header.version = 1;
  if (line == "UNKNOWN" || line.starts_with("UNKNOWN ")) return r;  // the rest is to be ignored
  std::string_view words[5];
  for (size_t i = 0; i < 5; ++i) {
    const size_t space = line.find(' ');
    if ((space == std::string_view::npos) != (i == 4)) return invalid("version 1: not six words");
    words[i] = line.substr(0, space);
    line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  }
  bool ipv6 = false;
  if (words[0] == "TCP6") {
    ipv6 = true;
  } else if (words[0] != "TCP4") {
    return invalid("version 1: the protocol is not TCP4, TCP6 or UNKNOWN");
  }
  uint16_t source_port = 0;
  uint16_t destination_port = 0;
  if (!parse_port(words[3], &source_port) || !parse_port(words[4], &destination_port)) {
    return invalid("version 1: a port is not a number from 0 to 65535");
  }
  if (!parse_address(words[1], ipv6, source_port, &r.header.source) ||
      !parse_address(words[2], ipv6, destination_port, &r.header.destination)) {
    return invalid("version 1: an address is not of the protocol's family");
  }
  r.header.local = false;
  return r;
}

uint16_t read_u16(const char* p) {
  return static_cast<uint16_t>((static_cast<unsigned char>(p[0]) << 8) | static_cast<unsigned char>(p[1]));
}

InetAddress v4_address(const char* ip, const char* port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  std::memcpy(&a.sin_addr, ip, 4);
  std::memcpy(&a.sin_port, port, 2);  // both in network order
  return InetAddress(a);
}

InetAddress v6_address(const char* ip, const char* port) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  std::memcpy(&a.sin6_addr, ip, 16);
  std::memcpy(&a.sin6_port, port, 2);
  return InetAddress(a);
}

ProxyParseResult parse_v2(std::string_view bytes) {
  if (bytes.size() < kV2Fixed) return ProxyParseResult();
  const auto version_command = static_cast<unsigned char>(bytes[12]);
  const auto family = static_cast<unsigned char>(bytes[13]);
  const size_t length = read_u16(bytes.data() + 14);
  if ((version_command >> 4) != 2) return invalid("version 2: the version nibble is not 2");
  const unsigned command = version_command & 0x0f;
  if (command > 1) return invalid("version 2: the command is neither LOCAL nor PROXY");
  if (length > kMaxProxyHeader - kV2Fixed) return invalid("version 2: longer than 4096 bytes");
  const unsigned address_family = family >> 4;
  const unsigned transport = family & 0x0f;
  if (address_family > 3 || transport > 2) return invalid("version 2: an unknown family or transport");
  size_t addresses = 0;
  if (address_family == 1) addresses = kV2Inet;
  if (address_family == 2) addresses = kV2Inet6;
  if (address_family == 3) addresses = kV2Unix;
  if (length < addresses) return invalid("version 2: too short for its family's addresses");
  if (bytes.size() < kV2Fixed + length) return ProxyParseResult();
  const char* block = bytes.data() + kV2Fixed;
  // TLVs: a type, a 16-bit length, the value; they must fill the rest
  // exactly.
  for (size_t at = addresses; at < length;) {
    if (length - at < 3) return invalid("version 2: a TLV cut short");
    const size_t value = read_u16(block + at + 1);
    if (length - at - 3 < value) return invalid("version 2: a TLV longer than the header");
    at += 3 + value;
  }
  ProxyParseResult r;
  r.status = ProxyParse::kDone;
  r.size = kV2Fixed + length;
  r.header.version = 2;
  // LOCAL: the sender's own connection, whatever the block says. UNSPEC and
  // UNIX: addresses we cannot use, so the connection's own.
  if (command == 0 || address_family == 0 || address_family == 3) return r;
  r.header.local = false;
  if (address_family == 1) {
    r.header.source = v4_address(block, block + 8);
    r.header.destination = v4_address(block + 4, block + 10);
  } else {
    r.header.source = v6_address(block, block + 32);
    r.header.destination = v6_address(block + 16, block + 34);
  }
  return r;
}

void append_u16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v & 0xff));
}

}  // namespace

ProxyParseResult parse_proxy_header(std::string_view bytes) {
  if (bytes.empty()) return ProxyParseResult();
  if (starts_as(bytes, kV2Signature)) return bytes.size() < kV2Signature.size() ? ProxyParseResult() : parse_v2(bytes);
  if (starts_as(bytes, kV1Prefix)) return bytes.size() < kV1Prefix.size() ? ProxyParseResult() : parse_v1(bytes);
  return invalid("no PROXY protocol header");
}

std::string proxy_header(int version, const ProxyHeader& header) {
  if (!header.local) {
    return version == 1 ? proxy_header_v1(header.source, header.destination)
                        : proxy_header_v2(header.source, header.destination);
  }
  if (version == 1) return "PROXY UNKNOWN\r\n";
  std::string out;
  out.reserve(kV2Fixed);
  out.append(kV2Signature);
  out.append("\x20\x00\x00\x00", 4);  // version 2, LOCAL; UNSPEC; no addresses
  return out;
}

std::string proxy_header_v1(const InetAddress& source, const InetAddress& destination) {
  if (source.is_ipv6() != destination.is_ipv6()) return "PROXY UNKNOWN\r\n";
  std::string out = source.is_ipv6() ? "PROXY TCP6 " : "PROXY TCP4 ";
  out += source.to_ip() + ' ' + destination.to_ip() + ' ' + std::to_string(source.port()) + ' ' +
         std::to_string(destination.port()) + "\r\n";
  return out;
}

std::string proxy_header_v2(const InetAddress& source, const InetAddress& destination) {
  std::string out;
  out.reserve(kV2Fixed + kV2Inet6);
  out.append(kV2Signature);
  const bool same = source.is_ipv6() == destination.is_ipv6();
  out.push_back(static_cast<char>(same ? 0x21 : 0x20));  // version 2; PROXY, or LOCAL when unnamable
  if (!same) {
    out.push_back('\0');  // UNSPEC
    append_u16(out, 0);
    return out;
  }
  const bool v6 = source.is_ipv6();
  out.push_back(static_cast<char>(v6 ? 0x21 : 0x11));  // INET6 or INET, STREAM
  append_u16(out, static_cast<uint16_t>(v6 ? kV2Inet6 : kV2Inet));
  if (v6) {
    const auto* s = reinterpret_cast<const sockaddr_in6*>(source.sockaddr_ptr());
    const auto* d = reinterpret_cast<const sockaddr_in6*>(destination.sockaddr_ptr());
    out.append(reinterpret_cast<const char*>(&s->sin6_addr), 16);
    out.append(reinterpret_cast<const char*>(&d->sin6_addr), 16);
  } else {
    const auto* s = reinterpret_cast<const sockaddr_in*>(source.sockaddr_ptr());
    const auto* d = reinterpret_cast<const sockaddr_in*>(destination.sockaddr_ptr());
    out.append(reinterpret_cast<const char*>(&s->sin_addr), 4);
    out.append(reinterpret_cast<const char*>(&d->sin_addr), 4);
  }
  append_u16(out, source.port());
  append_u16(out, destination.port());
  return out;
}

}  // namespace tern::net
