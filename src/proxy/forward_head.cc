#include "proxy/forward_head.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <string>

#include "http/field_values.h"
#include "net/buffer.h"
#include "net/inet_address.h"
#include "net/secure_layer.h"

namespace tern::proxy {
namespace {

using http::iequals;

bool named_in_connection(std::string_view name, const http::Request& request) {
  for (const http::Header& h : request.headers()) {
    if (h.id != http::FieldId::kConnection) continue;
    const bool found = !http::fields::for_each_element(h.value, [name](std::string_view option) {
      return !iequals(option, name);
    });
    if (found) return true;
  }
  return false;
}

// `connection`: the request has a Connection field, whose options name
// fields that stay behind too (most requests have none: no second scan).
bool forwarded_as_is(const http::Header& h, const http::Request& request, bool connection) {
  using http::FieldId;
  switch (h.id) {
    // For this hop only, or written below with this hop's values.
    case FieldId::kConnection:
    case FieldId::kKeepAlive:
    case FieldId::kTe:
    case FieldId::kTransferEncoding:
    case FieldId::kUpgrade:
    case FieldId::kExpect:
    case FieldId::kContentLength:
    case FieldId::kHost:
    case FieldId::kXRealIp:
    case FieldId::kXForwardedProto:
    case FieldId::kXForwardedHost:
    case FieldId::kXRequestId:
    case FieldId::kXForwardedFor:
    case FieldId::kForwarded:
      return false;
    case FieldId::kOther:
      if (iequals(h.name, "Trailer") || iequals(h.name, "Via")) return false;
      // Proxy-Connection, Proxy-Authorization and the rest: this hop's.
      if (h.name.size() > 6 && iequals(h.name.substr(0, 6), "Proxy-")) return false;
      break;
    default:
      break;
  }
  return !connection || !named_in_connection(h.name, request);
}

void field(net::Buffer& out, std::string_view name, std::string_view value) {
  out.append(name);
  out.append(": ");
  out.append(value);
  out.append("\r\n");
}

// The client's fields of this name joined into one list, each value
// followed by ", ": the caller appends this hop and the line's end.
void begin_list(net::Buffer& out, const http::Request& request, std::string_view name, bool fresh) {
  out.append(name);
  out.append(": ");
  if (fresh) return;
  for (const http::Header& h : request.headers()) {
    if (iequals(h.name, name) && !h.value.empty()) {
      out.append(h.value);
      out.append(", ");
    }
  }
}

}  // namespace

namespace {

// A set field's value: its text, or the client certificate's field it names.
std::string_view set_value(std::string_view value, const ForwardOptions& options) {
  if (!value.starts_with("$ssl_client_")) return value;
  const net::PeerCertificate* peer = options.client_certificate;
  if (value == "$ssl_client_verify") {
    if (!options.secure) return {};
    return peer == nullptr ? std::string_view("NONE") : std::string_view(peer->verify);
  }
  if (peer == nullptr) return {};
  if (value == "$ssl_client_s_dn") return peer->subject;
  if (value == "$ssl_client_i_dn") return peer->issuer;
  if (value == "$ssl_client_serial") return peer->serial;
  if (value == "$ssl_client_fingerprint") return peer->fingerprint;
  return value;
}

}  // namespace

bool is_client_certificate_variable(std::string_view value) {
  return value == "$ssl_client_s_dn" || value == "$ssl_client_i_dn" || value == "$ssl_client_verify" ||
         value == "$ssl_client_serial" || value == "$ssl_client_fingerprint";
}

bool FieldEdits::edits(std::string_view name) const {
  return std::any_of(set.begin(), set.end(), [name](const auto& field) { return iequals(field.first, name); }) ||
         std::any_of(remove.begin(), remove.end(), [name](const std::string& removed) { return iequals(removed, name); });
}

void write_forward_head(const http::Request& request, const ForwardOptions& options, net::Buffer& out) {
  out.append(options.method.empty() ? request.method_text() : options.method);
  out.append(" ");
  out.append(options.target);
  out.append(" HTTP/1.1\r\n");
  const std::string_view host = !options.host.empty()     ? options.host
                                : !request.host().empty() ? request.host()
                                                          : options.upstream_host;
  // The location's edits, if any: a field they name is theirs alone.
  const FieldEdits* edits = options.edits != nullptr && !options.edits->empty() ? options.edits : nullptr;
  const auto ours = [edits, &options](std::string_view name) {
    return (edits == nullptr || !edits->edits(name)) &&
           std::none_of(options.added.begin(), options.added.end(),
                        [name](const http::Header& added) { return iequals(added.name, name); });
  };
  if (ours("Host")) field(out, "Host", host);
  bool connection = false;
  for (const http::Header& h : request.headers()) connection = connection || h.id == http::FieldId::kConnection;
  for (const http::Header& h : request.headers()) {
    if (options.whole_response && http::is_precondition_or_range(h)) continue;
    if (forwarded_as_is(h, request, connection) && ours(h.name)) field(out, h.name, h.value);
  }
  const std::string_view proto = options.secure ? "https" : "http";
  if (options.client != nullptr) {
    if (ours("X-Real-IP")) field(out, "X-Real-IP", options.client->to_ip());
    const net::InetAddress& from = options.hop != nullptr && !options.fresh_lists ? *options.hop : *options.client;
    const std::string ip = from.to_ip();
    if (ours("X-Forwarded-For")) {
      begin_list(out, request, "X-Forwarded-For", options.fresh_lists);
      out.append(ip);
      out.append("\r\n");
    }
    // RFC 7239: an IPv6 node is quoted and bracketed.
    if (ours("Forwarded")) {
      begin_list(out, request, "Forwarded", options.fresh_lists);
      out.append(from.is_ipv6() ? "for=\"[" : "for=");
      out.append(ip);
      out.append(from.is_ipv6() ? "]\";proto=" : ";proto=");
      out.append(proto);
      if (!request.host().empty()) {
        out.append(";host=\"");
        out.append(request.host());
        out.append("\"");
      }
      out.append("\r\n");
    }
  }
  if (ours("X-Forwarded-Proto")) field(out, "X-Forwarded-Proto", proto);
  // The request's id (the client's X-Request-Id, or one made here), so that
  // the upstream's logs and ours name the request alike.
  if (ours("X-Request-Id")) field(out, "X-Request-Id", request.id());
  if (!request.host().empty() && ours("X-Forwarded-Host")) field(out, "X-Forwarded-Host", request.host());
  if (ours("Via")) {
    begin_list(out, request, "Via", options.fresh_lists);
    out.append(request.version() == http::Version::kHttp10 ? "1.0 " : "1.1 ");
    out.append(options.via);
    out.append("\r\n");
  }
  if (edits != nullptr) {
    // An empty value sends none (nginx's proxy_set_header X "").
    for (const auto& [name, value] : edits->set) {
      const std::string_view sent = set_value(value, options);
      if (!sent.empty()) field(out, name, sent);
    }
  }
  for (const http::Header& added : options.added) field(out, added.name, added.value);
  if (options.upgrade) {
    field(out, "Connection", "upgrade");
    field(out, "Upgrade", request.header(http::FieldId::kUpgrade));
  }
  if (options.content_length) {
    char digits[24];
    const std::to_chars_result written = std::to_chars(digits, digits + sizeof digits, *options.content_length);
    field(out, "Content-Length", std::string_view(digits, static_cast<size_t>(written.ptr - digits)));
  } else if (options.chunked) {
    field(out, "Transfer-Encoding", "chunked");
  }
  out.append("\r\n");
}

}  // namespace tern::proxy
