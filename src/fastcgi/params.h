// The CGI/1.1 variables of one HTTP request (RFC 3875 section 4.1), as
// nginx's fastcgi_params passes them to php-fpm, written as FastCGI PARAMS.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "fastcgi/protocol.h"
#include "http/exchange.h"
#include "http/request.h"
#include "net/inet_address.h"
#include "net/secure_layer.h"

namespace tern::fastcgi {

// What the request itself does not say: where the script is, and the two
// ends of the connection.
struct CgiContext {
  std::string_view script_filename;  // the file to run: document_root + script_name
  std::string_view script_name;      // its URI path ("/app/index.php")
  std::string_view path_info;        // what followed the script in the path
  std::string_view document_root;
  std::string_view document_uri;     // the decoded path of the request
  std::string_view server_software;  // "tern/0.1.0"
  std::string_view server_name;      // the configured server name
  net::InetAddress server_address;
  net::InetAddress remote_address;
  bool https = false;
  std::string_view ssl_protocol;  // with https: "TLSv1.3"
  std::string_view ssl_cipher;    // with https: OpenSSL's name of the cipher
  // With https, where the site asks for client certificates: as Apache's
  // mod_ssl names them, SSL_CLIENT_VERIFY and, with a certificate,
  // SSL_CLIENT_S_DN, SSL_CLIENT_I_DN, SSL_CLIENT_M_SERIAL and
  // SSL_CLIENT_FINGERPRINT.
  const net::PeerCertificate* client_certificate = nullptr;
  // A cache fills an entry with the response: the client's preconditions
  // and Range are not passed (http::is_precondition_or_range).
  bool whole_response = false;
  // REQUEST_METHOD in place of the request's (a cache's GET for a HEAD
  // that fills an entry); empty: the request's.
  std::string_view method;
  // Request fields passed (as HTTP_NAME) in place of the client's of those
  // names: a cache's own preconditions when it revalidates an entry. Not
  // owned.
  std::span<const http::Header> added;
};

// A CgiContext held for a PARAMS writer that runs later (again for a
// retry, or once a gathered body's length is known): the script's names
// owned, the connection's ends and TLS taken from the exchange now (the
// names of its protocol and cipher are OpenSSL's static strings; a client
// certificate's fields are copied). `server_name` and `software` are
// views that must outlive the writer.
class HeldCgiContext {
 public:
  struct Script {
    std::string root;       // the document root, without a final '/'
    std::string name;       // the script's URI path
    std::string path_info;  // what followed it
    std::string uri;        // the request's decoded path
  };
  HeldCgiContext(const http::Exchange& exchange, Script script, std::string_view server_name,
                 std::string_view software);

  // The context, viewing what this holds; valid while it lives.
  CgiContext view() const;

 private:
  Script script_;
  std::string filename_;
  std::string_view server_name_;
  std::string_view software_;
  net::InetAddress local_;
  net::InetAddress peer_;
  bool https_;
  std::string_view ssl_protocol_;
  std::string_view ssl_cipher_;
  std::optional<net::PeerCertificate> client_certificate_;
};

// Every variable, then each request header as HTTP_NAME (upper case, '-' as
// '_'). Only names of letters, digits and '-' are passed: one with '_' or
// '.' would be indistinguishable from its '-' twin (a client could send
// "X_Forwarded_For" or "X.Forwarded.For" to shadow the "X-Forwarded-For" a
// proxy sets; nginx drops such names too). "Proxy" is left out as well
// (httpoxy). CONTENT_LENGTH is `content_length` when given (a chunked body,
// counted once it has all arrived), else the request's own.
void write_cgi_params(ParamsWriter& params, const http::Request& request, const CgiContext& cgi,
                      std::optional<uint64_t> content_length = std::nullopt);

}  // namespace tern::fastcgi
