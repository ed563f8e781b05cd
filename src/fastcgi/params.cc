#include "fastcgi/params.h"

#include <algorithm>

#include <charconv>
#include <string>
#include <utility>

namespace tern::fastcgi {
namespace {

std::string_view number(uint64_t value, char (&digits)[24]) {
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, value);
  return {digits, static_cast<size_t>(end - digits)};
}

// Letters, digits and '-' only: any other byte a token allows ('_', '.',
// '~', ...) would turn into '_' or pass as it is, so "X.Forwarded.For" or
// "X_Forwarded_For" would reach the application as HTTP_X_FORWARDED_FOR,
// the variable a proxy in front of it sets.
bool cgi_safe_name(std::string_view name) {
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

void write_cgi_params(ParamsWriter& params, const http::Request& request, const CgiContext& cgi,
                      std::optional<uint64_t> content_length) {
  char digits[24];
  params.add("GATEWAY_INTERFACE", "CGI/1.1");
  params.add("REQUEST_SCHEME", cgi.https ? "https" : "http");
  params.add("SERVER_SOFTWARE", cgi.server_software);
  params.add("SERVER_PROTOCOL", http::version_name(request.version()));
  params.add("REQUEST_METHOD", cgi.method.empty() ? request.method_text() : cgi.method);
  params.add("REQUEST_URI", request.uri());
  params.add("REQUEST_ID", request.id());
  params.add("DOCUMENT_URI", cgi.document_uri);
  params.add("DOCUMENT_ROOT", cgi.document_root);
  params.add("SCRIPT_NAME", cgi.script_name);
  params.add("SCRIPT_FILENAME", cgi.script_filename);
  params.add("PATH_INFO", cgi.path_info);
  params.add("QUERY_STRING", request.query());
  params.add("REDIRECT_STATUS", "200");  // php's cgi.force_redirect wants it
  params.add("CONTENT_TYPE", request.header(http::FieldId::kContentType));
  if (content_length) {
    params.add("CONTENT_LENGTH", number(*content_length, digits));
  } else if (request.body_framing() == http::BodyFraming::kContentLength) {
    params.add("CONTENT_LENGTH", number(request.content_length(), digits));
  } else {
    params.add("CONTENT_LENGTH", "");
  }
  params.add("SERVER_NAME", cgi.server_name);
  params.add("SERVER_ADDR", cgi.server_address.to_ip());
  params.add("SERVER_PORT", number(cgi.server_address.port(), digits));
  params.add("REMOTE_ADDR", cgi.remote_address.to_ip());
  params.add("REMOTE_PORT", number(cgi.remote_address.port(), digits));
  if (!request.remote_user().empty()) {
    params.add("REMOTE_USER", request.remote_user());
    params.add("AUTH_TYPE", "Basic");
  }
  if (cgi.https) {
    params.add("HTTPS", "on");
    if (!cgi.ssl_protocol.empty()) params.add("SSL_PROTOCOL", cgi.ssl_protocol);
    if (!cgi.ssl_cipher.empty()) params.add("SSL_CIPHER", cgi.ssl_cipher);
    if (const net::PeerCertificate* peer = cgi.client_certificate) {
      params.add("SSL_CLIENT_VERIFY", peer->verify);
      if (!peer->subject.empty()) {
        params.add("SSL_CLIENT_S_DN", peer->subject);
        params.add("SSL_CLIENT_I_DN", peer->issuer);
        params.add("SSL_CLIENT_M_SERIAL", peer->serial);
        params.add("SSL_CLIENT_FINGERPRINT", peer->fingerprint);
      }
    }
  }

  // The request's host, which an absolute-form target sets in place of
  // the Host field (RFC 9112 3.2.2).
  if (!request.host().empty()) params.add("HTTP_HOST", request.host());
  std::string name;
  const auto add = [&params, &name](const http::Header& header) {
    name.assign("HTTP_");
    for (char c : header.name) {
      name += c == '-' ? '_' : static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    }
    params.add(name, header.value);
  };
  const auto replaced = [&cgi](std::string_view field) {
    return std::any_of(cgi.added.begin(), cgi.added.end(),
                       [field](const http::Header& added) { return http::iequals(added.name, field); });
  };
  for (const http::Header& header : request.headers()) {
    if (!cgi_safe_name(header.name)) continue;
    if (header.id == http::FieldId::kHost || http::iequals(header.name, "Proxy")) continue;
    if (cgi.whole_response && http::is_precondition_or_range(header)) continue;
    if (replaced(header.name)) continue;
    add(header);
  }
  for (const http::Header& header : cgi.added) {
    if (cgi_safe_name(header.name)) add(header);
  }
}

HeldCgiContext::HeldCgiContext(const http::Exchange& exchange, Script script, std::string_view server_name,
                               std::string_view software)
    : script_(std::move(script)),
      filename_(script_.root + script_.name),
      server_name_(server_name),
      software_(software),
      local_(exchange.local_address()),
      peer_(exchange.client_address()) {
  const net::SecureLayer* secure = exchange.secure();
  https_ = secure != nullptr;
  if (secure == nullptr) return;
  ssl_protocol_ = secure->protocol();
  ssl_cipher_ = secure->cipher();
  if (const net::PeerCertificate* certificate = secure->peer_certificate()) client_certificate_ = *certificate;
}

CgiContext HeldCgiContext::view() const {
  CgiContext cgi;
  cgi.script_filename = filename_;
  cgi.script_name = script_.name;
  cgi.path_info = script_.path_info;
  cgi.document_root = script_.root;
  cgi.document_uri = script_.uri;
  cgi.server_software = software_;
  cgi.server_name = server_name_;
  cgi.server_address = local_;
  cgi.remote_address = peer_;
  cgi.https = https_;
  cgi.ssl_protocol = ssl_protocol_;
  cgi.ssl_cipher = ssl_cipher_;
  if (client_certificate_) cgi.client_certificate = &*client_certificate_;
  return cgi;
}

}  // namespace tern::fastcgi
