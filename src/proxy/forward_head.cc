#include "proxy/forward_head.h"

#include <array>
#include <string>

#include "http/field_values.h"
#include "net/buffer.h"
#include "net/inet_address.h"

namespace tern::proxy {
namespace {

using http::iequals;

constexpr std::array<std::string_view, 13> kNotForwarded = {
    "Connection", "Keep-Alive",   "Proxy-Connection",  "TE",               "Trailer",
    "Transfer-Encoding", "Upgrade", "Expect",           "Content-Length",   "Host",
    "X-Real-IP",  "X-Forwarded-Proto", "X-Forwarded-Host",
};

bool named_in_connection(std::string_view name, const http::Request& request) {
  for (const http::Header& h : request.headers()) {
    if (!iequals(h.name, "Connection")) continue;
    const bool found = !http::fields::for_each_element(h.value, [name](std::string_view option) {
      return !iequals(option, name);
    });
    if (found) return true;
  }
  return false;
}

bool forwarded_as_is(const http::Header& h, const http::Request& request) {
  for (std::string_view name : kNotForwarded) {
    if (iequals(h.name, name)) return false;
  }
  // Appended to below, with this hop added.
  if (iequals(h.name, "X-Forwarded-For") || iequals(h.name, "Forwarded") || iequals(h.name, "Via")) {
    return false;
  }
  return !named_in_connection(h.name, request);
}

void field(net::Buffer& out, std::string_view name, std::string_view value) {
  out.append(name);
  out.append(": ");
  out.append(value);
  out.append("\r\n");
}

// The client's fields of this name joined into one list, then `hop`.
void append_to_list(net::Buffer& out, const http::Request& request, std::string_view name,
                    std::string_view hop) {
  out.append(name);
  out.append(": ");
  for (const http::Header& h : request.headers()) {
    if (iequals(h.name, name) && !h.value.empty()) {
      out.append(h.value);
      out.append(", ");
    }
  }
  out.append(hop);
  out.append("\r\n");
}

// RFC 7239 node: an IPv6 address is quoted and bracketed.
std::string forwarded_node(const net::InetAddress& address) {
  return address.is_ipv6() ? "\"[" + address.to_ip() + "]\"" : address.to_ip();
}

}  // namespace

void write_forward_head(const http::Request& request, const ForwardOptions& options, net::Buffer& out) {
  out.append(request.method_text());
  out.append(" ");
  out.append(options.target);
  out.append(" HTTP/1.1\r\n");
  const std::string_view host = options.host.empty() ? request.host() : options.host;
  field(out, "Host", host);
  for (const http::Header& h : request.headers()) {
    if (forwarded_as_is(h, request)) field(out, h.name, h.value);
  }
  const std::string_view proto = options.secure ? "https" : "http";
  if (options.client != nullptr) {
    const std::string ip = options.client->to_ip();
    field(out, "X-Real-IP", ip);
    append_to_list(out, request, "X-Forwarded-For", ip);
    std::string forwarded = "for=" + forwarded_node(*options.client) + ";proto=" + std::string(proto);
    if (!request.host().empty()) forwarded += ";host=\"" + std::string(request.host()) + "\"";
    append_to_list(out, request, "Forwarded", forwarded);
  }
  field(out, "X-Forwarded-Proto", proto);
  if (!request.host().empty()) field(out, "X-Forwarded-Host", request.host());
  const std::string via = std::string(request.version() == http::Version::kHttp10 ? "1.0 " : "1.1 ") +
                          std::string(options.via);
  append_to_list(out, request, "Via", via);
  if (options.upgrade) {
    field(out, "Connection", "upgrade");
    field(out, "Upgrade", request.header("Upgrade"));
  }
  if (options.content_length) {
    field(out, "Content-Length", std::to_string(*options.content_length));
  } else if (options.chunked) {
    field(out, "Transfer-Encoding", "chunked");
  }
  out.append("\r\n");
}

}  // namespace tern::proxy
