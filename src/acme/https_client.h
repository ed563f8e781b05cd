// HttpsClient: the requests of the ACME thread to its CA, one at a time,
// blocking: HTTP/1.1 over TLS on OpenSSL 3, the CA's certificate verified
// against the system's trust store or a root given (`ca_root`, for a test
// or private CA), the response read with http1's ResponseParser and
// ChunkedDecoder. A connection per request (Connection: close): an order
// makes a handful of requests a day.
//
//   HttpsClient client({.ca_root = "/etc/tern/pebble.minica.pem"});
//   HttpsClient::Response r = client.send("POST", url, "application/jose+json", jws);
//   if (r.status == 201) account_url = r.field("Location");
//
// Never on a loop thread: it waits on the network (each step bounded by
// `timeout`). Throws HttpsClient::Failure when the CA cannot be reached or
// answers with something that is not HTTP. Not thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace tern::acme {

class HttpsClient {
 public:
  struct Options {
    std::string ca_root;  // PEM file of the roots to trust; empty: the system's
    std::chrono::milliseconds timeout{30000};  // to connect, and for each read or write
    size_t max_body = 4 << 20;  // a certificate chain, a directory: a few KiB
    std::string user_agent = "tern";  // RFC 8555 6.1: every request names its client
  };
  struct Response {
    int status = 0;
    std::vector<std::pair<std::string, std::string>> fields;
    std::string body;
    // The first field with this name (case-insensitive), or "".
    std::string_view field(std::string_view name) const;
  };
  // Why a request got no response.
  class Failure : public std::runtime_error {
   public:
    using std::runtime_error::runtime_error;
  };

  // Throws std::runtime_error when the roots cannot be loaded.
  explicit HttpsClient(Options options);
  ~HttpsClient();
  HttpsClient(const HttpsClient&) = delete;
  HttpsClient& operator=(const HttpsClient&) = delete;

  // `url`: https://host[:port]/path. `body` goes with `content_type` when
  // either is set; GET and HEAD send none.
  Response send(std::string_view method, std::string_view url, std::string_view content_type = {},
                std::string_view body = {});

 private:
  Options options_;
  ssl_ctx_st* ctx_ = nullptr;
};

}  // namespace tern::acme
