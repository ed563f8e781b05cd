#include "tls/session.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <climits>
#include <string_view>

#include "base/log.h"

namespace tern::tls {
namespace {

// The answer to plain HTTP on an HTTPS address (nginx sends the same status).
constexpr std::string_view kPlainHttpBody =
    "<html>\r\n<head><title>400 Bad Request</title></head>\r\n<body>\r\n"
    "<h1>400 Bad Request</h1>\r\n"
    "<p>This address speaks HTTPS: the request came in plain HTTP. Use https://.</p>\r\n"
    "</body>\r\n</html>\r\n";

// Plaintext read per SSL_read: a whole record.
constexpr size_t kRecordSize = 16 * 1024;

// A scope that lends the session its buffers for one call.
class Lend {
 public:
  Lend(net::Buffer** in, net::Buffer* in_value, net::Buffer** out, net::Buffer* out_value)
      : in_(in), out_(out) {
    *in_ = in_value;
    *out_ = out_value;
  }
  ~Lend() {
    *in_ = nullptr;
    *out_ = nullptr;
  }
  Lend(const Lend&) = delete;
  Lend& operator=(const Lend&) = delete;

 private:
  net::Buffer** in_;
  net::Buffer** out_;
};

}  // namespace

BIO_METHOD* Session::bio_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tern connection");
    BIO_meth_set_write(m, &Session::bio_write);
    BIO_meth_set_read(m, &Session::bio_read);
    BIO_meth_set_ctrl(m, &Session::bio_ctrl);
    return m;
  }();
  return method;
}

int Session::bio_write(BIO* bio, const char* data, int length) {
  auto* self = static_cast<Session*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  if (self->out_ == nullptr) {
    BIO_set_retry_write(bio);
    return -1;
  }
  self->out_->append(data, static_cast<size_t>(length));
  return length;
}

int Session::bio_read(BIO* bio, char* data, int length) {
  auto* self = static_cast<Session*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  if (self->in_ == nullptr || self->in_->empty()) {
    BIO_set_retry_read(bio);
    return -1;
  }
  const size_t n = std::min(static_cast<size_t>(length), self->in_->readable_bytes());
  std::copy_n(self->in_->peek(), n, data);
  self->in_->retrieve(n);
  return static_cast<int>(n);
}

long Session::bio_ctrl(BIO* /*bio*/, int command, long /*number*/, void* /*pointer*/) {
  return command == BIO_CTRL_FLUSH ? 1 : 0;
}

Session::Session(SSL* ssl, std::shared_ptr<const void> keep, std::atomic<uint64_t>* handshakes,
                 std::atomic<uint64_t>* resumed, std::atomic<uint64_t>* failed, Role role)
    : ssl_(ssl),
      keep_(std::move(keep)),
      handshakes_(handshakes),
      resumed_(resumed),
      failed_(failed),
      first_bytes_checked_(role == Role::kClient) {
  BIO* bio = BIO_new(bio_method());
  BIO_set_data(bio, this);
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl_, bio, bio);  // one reference, for both directions
  if (role == Role::kClient) {
    SSL_set_connect_state(ssl_);
  } else {
    SSL_set_accept_state(ssl_);
  }
}

Session::~Session() {
  // A connection that ends without its closing alerts (most clients just
  // close) would take its session out of the cache: unless the session
  // failed, it stays resumable, as with nginx.
  if (established_ && !broken_) SSL_set_shutdown(ssl_, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
  SSL_free(ssl_);
}

net::SecureLayer::Status Session::receive(net::Buffer& from_peer, net::Buffer& plain, net::Buffer& to_send) {
  Lend lend(&in_, &from_peer, &out_, &to_send);
  if (!first_bytes_checked_ && !from_peer.empty()) {
    first_bytes_checked_ = true;
    const auto first = static_cast<unsigned char>(from_peer.peek()[0]);
    if (first != 0x16) {  // a TLS handshake record starts with its type, 22
      from_peer.retrieve_all();
      failed_->fetch_add(1, std::memory_order_relaxed);
      if (first >= 'A' && first <= 'Z') return refuse_plain_http(to_send);
      TERN_LOG_DEBUG("TLS: the first bytes are not a handshake record");
      return Status::kFailed;
    }
  }
  if (!established_) {
    const Status status = handshake(to_send);
    if (status != Status::kOk || !established_) return status;
  }
  for (;;) {
    plain.ensure_writable(kRecordSize);
    const int room = static_cast<int>(std::min<size_t>(plain.writable_bytes(), INT_MAX));
    const int n = SSL_read(ssl_, plain.begin_write(), room);
    if (n > 0) {
      plain.has_written(static_cast<size_t>(n));
      continue;
    }
    const int error = SSL_get_error(ssl_, n);
    if (error == SSL_ERROR_WANT_READ) return Status::kOk;
    if (error == SSL_ERROR_ZERO_RETURN) return Status::kPeerClosed;
    return failed("read", to_send);
  }
}

net::SecureLayer::Status Session::start(net::Buffer& to_send) {
  if (established_ || SSL_is_server(ssl_) == 1) return Status::kOk;
  Lend lend(&in_, nullptr, &out_, &to_send);
  return handshake(to_send);
}

net::SecureLayer::Status Session::handshake(net::Buffer& to_send) {
  ERR_clear_error();
  const int done = SSL_do_handshake(ssl_);
  if (done != 1) {
    const int error = SSL_get_error(ssl_, done);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return Status::kOk;
    return failed("handshake", to_send);
  }
  established_ = true;
  handshakes_->fetch_add(1, std::memory_order_relaxed);
  if (SSL_session_reused(ssl_) == 1) resumed_->fetch_add(1, std::memory_order_relaxed);
  return Status::kOk;
}

net::SecureLayer::Status Session::send(const char* data, size_t n, net::Buffer& to_send) {
  if (n == 0) return Status::kOk;
  Lend lend(&in_, nullptr, &out_, &to_send);
  ERR_clear_error();
  const int written = SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(n, INT_MAX)));
  if (written <= 0 || static_cast<size_t>(written) != n) return failed("write", to_send);
  return Status::kOk;
}

void Session::close(net::Buffer& to_send) {
  Lend lend(&in_, nullptr, &out_, &to_send);
  (void)SSL_shutdown(ssl_);
  ERR_clear_error();
}

net::SecureLayer::Status Session::refuse_plain_http(net::Buffer& to_send) {
  std::string head = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/html\r\nContent-Length: " +
                     std::to_string(kPlainHttpBody.size()) + "\r\nConnection: close\r\n\r\n";
  to_send.append(head.data(), head.size());
  to_send.append(kPlainHttpBody.data(), kPlainHttpBody.size());
  TERN_LOG_DEBUG("TLS: plain HTTP on an HTTPS address, answered 400");
  return Status::kFinish;
}

net::SecureLayer::Status Session::failed(const char* what, net::Buffer& to_send) {
  const unsigned long code = ERR_peek_error();
  const char* reason = code != 0 ? ERR_reason_error_string(code) : nullptr;
  error_ = reason != nullptr ? reason : "connection error";
  // A client that refused the server's certificate says why.
  const long verified = SSL_is_server(ssl_) == 1 ? X509_V_OK : SSL_get_verify_result(ssl_);
  if (!established_ && verified != X509_V_OK) {
    error_ += ": ";
    error_ += X509_verify_cert_error_string(verified);
  }
  TERN_LOG_DEBUG("TLS {} failed: {}", what, error_);
  ERR_clear_error();
  broken_ = true;
  if (!established_) failed_->fetch_add(1, std::memory_order_relaxed);
  // An alert the peer should see goes out before the close.
  return to_send.empty() ? Status::kFailed : Status::kFinish;
}

std::string_view Session::protocol() const { return SSL_get_version(ssl_); }

std::string_view Session::cipher() const {
  const char* name = SSL_get_cipher_name(ssl_);
  return name != nullptr ? name : "";
}

std::string_view Session::server_name() const {
  const char* name = SSL_get_servername(ssl_, TLSEXT_NAMETYPE_host_name);
  return name != nullptr ? name : "";
}

std::string_view Session::application_protocol() const {
  const unsigned char* data = nullptr;
  unsigned int length = 0;
  SSL_get0_alpn_selected(ssl_, &data, &length);
  return data != nullptr ? std::string_view(reinterpret_cast<const char*>(data), length) : std::string_view();
}

bool Session::resumed() const { return SSL_session_reused(ssl_) == 1; }

std::string openssl_reason() {
  const unsigned long code = ERR_get_error();
  const char* reason = code != 0 ? ERR_reason_error_string(code) : nullptr;
  ERR_clear_error();
  return reason != nullptr ? reason : "unknown error";
}

}  // namespace tern::tls
