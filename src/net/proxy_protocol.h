// The PROXY protocol (HAProxy's, versions 1 and 2): the header a load
// balancer sends before anything else on a connection it relays, naming the
// client's address and port and the address it connected to.
//
//   version 1, text:   "PROXY TCP4 203.0.113.7 10.0.0.2 51234 443\r\n"
//   version 2, binary: a 12-byte signature, version and command, family,
//                      a length, then the addresses and TLVs
//
// parse_proxy_header() reads one from the start of what a connection
// received, in any number of pieces: it answers kIncomplete while the bytes
// are a prefix of a header that could still be valid, and refuses anything
// else at once, so a connection never holds more than kMaxProxyHeader bytes
// waiting for one. TLVs are checked for framing and skipped.
//
// proxy_header_v1() and proxy_header_v2() write one, for a connection to a
// server that expects it.
//
// Pure functions; any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "net/inet_address.h"

namespace tern::net {

// Version 1's bound (the specification's): 107 bytes, CRLF included.
constexpr size_t kMaxProxyHeaderV1 = 107;
// Our bound on a version 2 header: its 16 fixed bytes and up to 4,080 of
// addresses and TLVs (the specification allows 65,535; load balancers send
// well under a kilobyte, a client certificate's names included).
constexpr size_t kMaxProxyHeader = 4096;

// What a PROXY protocol header says of the client.
struct ProxyHeader {
  // The sender's own connection (version 2's LOCAL command, a health
  // check) or a family it could not name (version 1's UNKNOWN, version 2's
  // UNSPEC and UNIX): the addresses are those of the TCP connection.
  bool local = true;
  InetAddress source = InetAddress();       // the client, when !local
  InetAddress destination = InetAddress();  // the address the client connected to, when !local
  int version = 0;          // 1 or 2
};

// Where reading a header stands: more bytes needed, a header, or garbage.
enum class ProxyParse : uint8_t { kIncomplete, kDone, kInvalid };

// What parse_proxy_header() found.
struct ProxyParseResult {
  ProxyParse status = ProxyParse::kIncomplete;  // see ProxyParse
  size_t size = 0;            // kDone: the header's bytes, to be dropped
  ProxyHeader header;         // kDone
  const char* error = "";     // kInvalid: why, for a log line
};

// Reads a version 1 or 2 header from the start of `bytes` (the first bytes
// of a connection, as many as have come).
ProxyParseResult parse_proxy_header(std::string_view bytes);

// A listener whose connections begin with the header
// (TcpServer::set_proxy_protocol).
struct ProxyProtocolOptions {
  // Whether a peer may send the header (the load balancers' networks);
  // any thread. Required.
  std::function<bool(const InetAddress& peer)> trusted;
  // How long a connection may take to send it.
  std::chrono::milliseconds timeout{10000};
};

// "PROXY TCP4 ..." for a connection from `source` to `destination` (of the
// same family; "PROXY UNKNOWN" otherwise).
std::string proxy_header_v1(const InetAddress& source, const InetAddress& destination);
// The binary form, with the PROXY command and no TLVs.
std::string proxy_header_v2(const InetAddress& source, const InetAddress& destination);
// `header` in `version` (1 or 2); a local one as "PROXY UNKNOWN" or the
// LOCAL command (a connection of the sender's own: a health check).
std::string proxy_header(int version, const ProxyHeader& header);

}  // namespace tern::net
