// The head of a request as the reverse proxy forwards it to an upstream
// HTTP/1.1 server: the client's request line and fields, less what belongs
// to the client's connection, plus what tells the upstream where the
// request came from.
//
//   write_forward_head(request, options, upstream_output);
//
// Not forwarded: the hop-by-hop fields (Connection, Keep-Alive,
// Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade) and every
// field the client's Connection names (RFC 9110 7.6.1); Expect (tern
// answers 100-continue itself); Content-Length (written again for the body
// as it is sent on); X-Real-IP, X-Forwarded-Proto and X-Forwarded-Host
// (replaced, so that a client cannot claim another address or scheme).
// Nor any other Proxy-* field (Proxy-Authorization is for this hop: a
// credential the client meant for a proxy, not for the application).
// Added: Host (the client's, or the one the location sets; for a request
// without one, an HTTP/1.0 client's, the upstream's name), X-Real-IP (the
// client), X-Forwarded-For (the client's list with the address the request
// came from appended, as nginx's $proxy_add_x_forwarded_for: the client,
// or the last proxy where a trusted one named the client), X-Forwarded-Proto,
// X-Forwarded-Host, RFC 7239 Forwarded (appended to the client's, the
// same way), Via (RFC 9110 7.6.3,
// appended), and for a protocol upgrade (WebSocket) "Connection: upgrade"
// with the client's Upgrade.
//
// Any thread; no state.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/request.h"

namespace tern::net {
class Buffer;
class InetAddress;
struct PeerCertificate;
}  // namespace tern::net

namespace tern::proxy {

// Fields a location sets on the forwarded request (in place of the
// client's and tern's own of those names) or takes out of it. Not the
// fields that frame the message (the config refuses them). A value that is
// one of the client certificate's variables ($ssl_client_s_dn,
// $ssl_client_i_dn, $ssl_client_verify, $ssl_client_serial,
// $ssl_client_fingerprint) sends the certificate's; empty (no certificate,
// plain HTTP), the field is not sent.
struct FieldEdits {
  std::vector<std::pair<std::string, std::string>> set;
  std::vector<std::string> remove;
  bool empty() const { return set.empty() && remove.empty(); }
  // Whether the field `name` is set or taken out here.
  bool edits(std::string_view name) const;
};

struct ForwardOptions {
  std::string_view target;  // the request-target to send (the client's, or rewritten)
  std::string_view host;    // the Host to send; empty: the client's
  std::string_view upstream_host;  // sent when neither names one (nginx's $proxy_host)
  const net::InetAddress* client = nullptr;  // the client's address
  // Where the request came from, when not from the client itself (a
  // trusted proxy in front); null: the client.
  const net::InetAddress* hop = nullptr;
  bool secure = false;                       // the client came over TLS
  // What the client's certificate was found to be, where the site asked
  // for one (mutual TLS); null: none asked.
  const net::PeerCertificate* client_certificate = nullptr;
  std::string_view via = "tern";             // this proxy's name in Via and Forwarded by
  // How the body goes on: with a length, chunked (a client's chunked body,
  // whose length is not known yet), or none.
  std::optional<uint64_t> content_length;
  bool chunked = false;
  bool upgrade = false;  // forward the client's Upgrade (WebSocket)
  const FieldEdits* edits = nullptr;  // null: none
  // A request of this proxy's own made from the client's (forward auth's
  // check), or a cache's GET for a client's HEAD that fills an entry: its
  // method, always without a body; empty: the client's.
  std::string_view method;
  // Fields written last, in place of the client's of those names (forward
  // auth's X-Forwarded-Method); not owned.
  std::span<const http::Header> added;
  // X-Forwarded-For, Forwarded and Via begin here, naming the client (not
  // a hop) and nothing the client sent: a request of this proxy's own whose
  // receiver judges the client by them (forward auth's check: a client
  // must not claim another address).
  bool fresh_lists = false;
  // A cache fills an entry with the response: the client's preconditions
  // and Range stay behind (http::is_precondition_or_range).
  bool whole_response = false;
};

// Whether `value` names a client certificate's variable ("$ssl_client_s_dn").
bool is_client_certificate_variable(std::string_view value);

void write_forward_head(const http::Request& request, const ForwardOptions& options, net::Buffer& out);

}  // namespace tern::proxy
