#include "acme/https_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "http/request.h"
#include "http1/chunked_decoder.h"
#include "http1/response_parser.h"
#include "tls/openssl_layer.h"

namespace tern::acme {
namespace {

using Failure = HttpsClient::Failure;

struct Target {
  std::string host;  // without an IPv6 literal's brackets
  std::string port = "443";
  std::string authority;  // for Host: as the URL has it
  std::string path = "/";
};

Target parse_url(std::string_view url) {
  constexpr std::string_view kScheme = "https://";
  if (!url.starts_with(kScheme)) throw Failure("not an https URL: " + std::string(url));
  std::string_view rest = url.substr(kScheme.size());
  Target target;
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) target.path = rest.substr(slash);
  target.authority = authority;
  std::string_view host = authority;
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) throw Failure("bad host in " + std::string(url));
    host = authority.substr(1, close - 1);
    if (authority.size() > close + 1) {
      if (authority[close + 1] != ':') throw Failure("bad host in " + std::string(url));
      target.port = authority.substr(close + 2);
    }
  } else if (const size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    target.port = authority.substr(colon + 1);
  }
  if (host.empty() || target.port.empty()) throw Failure("bad host in " + std::string(url));
  target.host = host;
  return target;
}

// Closes the descriptor when it goes.
struct Socket {
  int fd = -1;
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

// A connected, blocking socket whose reads and writes give up after `timeout`.
void connect_to(const Target& target, std::chrono::milliseconds timeout, Socket* out) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(target.host.c_str(), target.port.c_str(), &hints, &found); rc != 0) {
    throw Failure(target.host + ": " + ::gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> addresses(found, ::freeaddrinfo);
  int error = 0;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    Socket s{::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
    if (s.fd < 0) {
      error = errno;
      continue;
    }
    if (::connect(s.fd, a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        error = errno;
        continue;
      }
      pollfd p{s.fd, POLLOUT, 0};
      socklen_t size = sizeof error;
      const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
      if (ready <= 0) {
        error = ready == 0 ? ETIMEDOUT : errno;
        continue;
      }
      if (::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0 || error != 0) continue;
    }
    const int flags = ::fcntl(s.fd, F_GETFL);
    ::fcntl(s.fd, F_SETFL, flags & ~O_NONBLOCK);
    timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    ::setsockopt(s.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(s.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    const int on = 1;
    ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    std::swap(out->fd, s.fd);
    return;
  }
  throw Failure(target.authority + ": " + std::strerror(error != 0 ? error : EHOSTUNREACH));
}

// One TLS connection, closed when it goes (a failed handshake too).
class Connection {
 public:
  Connection(ssl_ctx_st* ctx, const Target& target, int fd) : ssl_(SSL_new(ctx)), target_(target) {
    if (!ssl_) throw Failure("TLS: " + tls::openssl_reason());
    in6_addr ip{};
    const bool literal = ::inet_pton(AF_INET6, target.host.c_str(), &ip) == 1 ||
                         ::inet_pton(AF_INET, target.host.c_str(), &ip) == 1;
    // The CA's certificate must name the host (or the address) asked for.
    const bool named = literal ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_.get()), target.host.c_str()) == 1
                               : SSL_set_tlsext_host_name(ssl_.get(), target.host.c_str()) == 1 &&
                                     SSL_set1_host(ssl_.get(), target.host.c_str()) == 1;
    if (!named || SSL_set_fd(ssl_.get(), fd) != 1) throw Failure("TLS: " + tls::openssl_reason());
    if (SSL_connect(ssl_.get()) != 1) fail("handshake");
  }

  void write_all(std::string_view data) {
    while (!data.empty()) {
      size_t written = 0;
      if (SSL_write_ex(ssl_.get(), data.data(), data.size(), &written) != 1) fail("write");
      data.remove_prefix(written);
    }
  }
  // Appends what comes to *in; false at the end of the stream.
  bool read_more(std::string* in) {
    char buffer[16 * 1024];
    size_t got = 0;
    if (SSL_read_ex(ssl_.get(), buffer, sizeof buffer, &got) == 1) {
      in->append(buffer, got);
      return true;
    }
    if (SSL_get_error(ssl_.get(), 0) == SSL_ERROR_ZERO_RETURN) return false;
    fail("read");
  }

 private:
  [[noreturn]] void fail(const char* doing) {
    const int saved = errno;
    std::string why = tls::openssl_reason();
    if (const long verified = SSL_get_verify_result(ssl_.get()); verified != X509_V_OK) {
      why += std::string(": ") + X509_verify_cert_error_string(verified);
    } else if (why == "unknown error" && saved != 0) {
      why = saved == EAGAIN || saved == EWOULDBLOCK ? "timed out" : std::strerror(saved);
    }
    throw Failure(target_.authority + ": TLS " + doing + ": " + why);
  }

  struct Free {
    void operator()(SSL* ssl) const { SSL_free(ssl); }
  };
  const std::unique_ptr<SSL, Free> ssl_;
  const Target& target_;
};

}  // namespace

std::string_view HttpsClient::Response::field(std::string_view name) const {
  for (const auto& [n, v] : fields) {
    if (http::iequals(n, name)) return v;
  }
  return {};
}

HttpsClient::HttpsClient(Options options) : options_(std::move(options)), ctx_(SSL_CTX_new(TLS_client_method())) {
  if (ctx_ == nullptr) tls::throw_openssl_error("TLS client");
  SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
  // A CA that closes without close_notify has still sent all it meant to.
  SSL_CTX_set_options(ctx_, SSL_OP_IGNORE_UNEXPECTED_EOF);
  const bool trusted = options_.ca_root.empty()
                           ? SSL_CTX_set_default_verify_paths(ctx_) == 1
                           : SSL_CTX_load_verify_locations(ctx_, options_.ca_root.c_str(), nullptr) == 1;
  if (!trusted) {
    SSL_CTX_free(ctx_);
    tls::throw_openssl_error(options_.ca_root.empty() ? "the system's trusted roots" : "ca_root " + options_.ca_root);
  }
}

HttpsClient::~HttpsClient() { SSL_CTX_free(ctx_); }

HttpsClient::Response HttpsClient::send(std::string_view method, std::string_view url,
                                        std::string_view content_type, std::string_view body) {
  const Target target = parse_url(url);
  Socket socket;
  connect_to(target, options_.timeout, &socket);
  Connection tls(ctx_, target, socket.fd);
  std::string request;
  request.append(method).append(" ").append(target.path).append(" HTTP/1.1\r\nHost: ").append(target.authority);
  request.append("\r\nUser-Agent: ").append(options_.user_agent).append("\r\nAccept: */*\r\nConnection: close\r\n");
  if (!content_type.empty() || !body.empty()) {
    if (!content_type.empty()) request.append("Content-Type: ").append(content_type).append("\r\n");
    request.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  }
  request.append("\r\n").append(body);
  tls.write_all(request);

  std::string in;
  http::ResponseParser parser;
  http::ResponseHead head;
  for (;;) {
    const http::ParseStatus parsed = parser.parse(in, method == "HEAD", &head);
    if (parsed == http::ParseStatus::kError) {
      throw Failure(target.authority + ": not an HTTP response (" + std::string(parser.error_reason()) + ")");
    }
    if (parsed == http::ParseStatus::kComplete && head.interim()) {
      in.erase(0, head.head_size);  // a 100 Continue or 103: the final one follows
      parser.reset();
      continue;
    }
    if (parsed == http::ParseStatus::kComplete) break;
    if (!tls.read_more(&in)) throw Failure(target.authority + ": the connection closed before a response");
  }
  Response response;
  response.status = head.status;
  for (const http::Header& field : head.headers) response.fields.emplace_back(field.name, field.value);
  in.erase(0, head.head_size);
  auto too_long = [&] { return Failure(target.authority + ": a response body over " + std::to_string(options_.max_body) + " bytes"); };
  switch (head.body) {
    case http::ResponseHead::Body::kNone:
      break;
    case http::ResponseHead::Body::kLength:
      if (head.content_length > options_.max_body) throw too_long();
      while (in.size() < head.content_length) {
        if (!tls.read_more(&in)) throw Failure(target.authority + ": the body ended early");
      }
      response.body = in.substr(0, head.content_length);
      break;
    case http::ResponseHead::Body::kChunked: {
      http::ChunkedDecoder decoder({.max_body = options_.max_body});
      for (;;) {
        size_t used = 0;
        std::string_view data;
        const http::ChunkedDecoder::Status s = decoder.next(in, &used, &data);
        if (s == http::ChunkedDecoder::kData) response.body.append(data);
        in.erase(0, used);
        if (s == http::ChunkedDecoder::kDone) break;
        if (s == http::ChunkedDecoder::kError) throw Failure(target.authority + ": a broken chunked body");
        if (s == http::ChunkedDecoder::kNeedMore && !tls.read_more(&in)) {
          throw Failure(target.authority + ": the body ended early");
        }
      }
      break;
    }
    case http::ResponseHead::Body::kUntilClose:
      while (tls.read_more(&in)) {
        if (in.size() > options_.max_body) throw too_long();
      }
      response.body = std::move(in);
      break;
  }
  return response;
}

}  // namespace tern::acme
