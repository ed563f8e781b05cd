#include "tls/openssl_layer.h"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <linux/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include "base/log.h"
#include "net/sockets.h"

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

// The controls OpenSSL sends a BIO about kernel TLS. Their numbers are
// reserved in <openssl/bio.h> ("internal BIO"), which names only the two
// questions (BIO_CTRL_GET_KTLS_SEND, BIO_CTRL_GET_KTLS_RECV).
constexpr int kSetKernelTls = 72;        // the keys of one direction: hand them over
constexpr int kNextRecordType = 74;      // the next write is one record of this type
constexpr int kClearNextRecordType = 75;

constexpr uint8_t kHandshakeRecord = 22;
constexpr uint8_t kKeyUpdateMessage = 24;

// The size of the kernel's key structure for the cipher it names; 0 for
// one we do not know.
size_t crypto_info_size(const tls_crypto_info* info) {
  switch (info->cipher_type) {
    case TLS_CIPHER_AES_GCM_128: return sizeof(tls12_crypto_info_aes_gcm_128);
    case TLS_CIPHER_AES_GCM_256: return sizeof(tls12_crypto_info_aes_gcm_256);
    case TLS_CIPHER_AES_CCM_128: return sizeof(tls12_crypto_info_aes_ccm_128);
    case TLS_CIPHER_CHACHA20_POLY1305: return sizeof(tls12_crypto_info_chacha20_poly1305);
    default: return 0;
  }
}

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

BIO_METHOD* OpenSslLayer::bio_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tern connection");
    BIO_meth_set_write(m, &OpenSslLayer::bio_write);
    BIO_meth_set_read(m, &OpenSslLayer::bio_read);
    BIO_meth_set_ctrl(m, &OpenSslLayer::bio_ctrl);
    return m;
  }();
  return method;
}

int OpenSslLayer::bio_write(BIO* bio, const char* data, int length) {
  auto* self = static_cast<OpenSslLayer*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  if (self->out_ == nullptr) {
    BIO_set_retry_write(bio);
    return -1;
  }
  if (self->kernel_sends_) return self->append_clear_record(data, static_cast<size_t>(length)) ? length : -1;
  self->out_->append(data, static_cast<size_t>(length));
  return length;
}

int OpenSslLayer::bio_read(BIO* bio, char* data, int length) {
  auto* self = static_cast<OpenSslLayer*>(BIO_get_data(bio));
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

long OpenSslLayer::bio_ctrl(BIO* bio, int command, long number, void* pointer) {
  auto* self = static_cast<OpenSslLayer*>(BIO_get_data(bio));
  switch (command) {
    case BIO_CTRL_FLUSH: return 1;  // records leave with the connection's output
    case BIO_CTRL_GET_KTLS_SEND: return self->kernel_sends_ ? 1 : 0;
    case BIO_CTRL_GET_KTLS_RECV: return 0;  // receiving stays in OpenSSL
    case kSetKernelTls: return number != 0 && self->hand_to_kernel(pointer) ? 1 : 0;
    case kNextRecordType: self->record_type_ = static_cast<uint8_t>(number); return 1;
    case kClearNextRecordType: self->record_type_ = 0; return 1;
    default: return 0;
  }
}

bool OpenSslLayer::hand_to_kernel(const void* crypto_info) {
  // Once only: a second hand-over would be a renegotiation or a key update,
  // which OpenSSL would then do in its own records under the kernel's.
  if (kernel_sends_) {
    broken_ = true;
    return false;
  }
  if (socket_ < 0 || out_ == nullptr) return false;
  const auto* info = static_cast<const tls_crypto_info*>(crypto_info);
  const size_t size = crypto_info_size(info);
  if (size == 0) return false;
  if (::setsockopt(socket_, SOL_TCP, TCP_ULP, "tls", sizeof "tls") != 0) {
    TERN_LOG_DEBUG("TLS: no kernel TLS for this connection: {}", std::strerror(errno));
    return false;
  }
  // The records made so far (the handshake's) leave now, under OpenSSL's
  // keys: after the switch the kernel would encrypt them again. A socket
  // that cannot take them all at once (it could on a new connection) keeps
  // the rest, and the connection stays with OpenSSL.
  while (!out_->empty()) {
    int err = 0;
    const ssize_t n = net::sockets::write(socket_, out_->peek(), out_->readable_bytes(), &err);
    if (n <= 0) return false;
    out_->retrieve(static_cast<size_t>(n));
    written_ += static_cast<size_t>(n);
  }
  if (::setsockopt(socket_, SOL_TLS, TLS_TX, crypto_info, static_cast<socklen_t>(size)) != 0) {
    TERN_LOG_DEBUG("TLS: the kernel refused the keys ({}): {}", info->cipher_type, std::strerror(errno));
    return false;
  }
  kernel_sends_ = true;
  counters_->kernel.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool OpenSslLayer::append_clear_record(const char* data, size_t n) {
  // OpenSSL names the type of each record it makes after the switch; data
  // of its own it does not make here (the connection writes that).
  const uint8_t type = std::exchange(record_type_, 0);
  if (type == 0 || n > 0xffff) {
    broken_ = true;
    return false;
  }
  if (type == kHandshakeRecord && n > 0 && static_cast<uint8_t>(data[0]) == kKeyUpdateMessage) {
    TERN_LOG_DEBUG("TLS: a key update of our own under kernel TLS, which cannot take new keys: closing");
    broken_ = true;
    return false;
  }
  const uint8_t header[5] = {type, 3, 3, static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n)};
  out_->append(header, sizeof header);
  out_->append(data, n);
  return true;
}

OpenSslLayer::OpenSslLayer(SSL* ssl, std::shared_ptr<const void> keep, Counters* counters, Role role)
    : ssl_(ssl),
      keep_(std::move(keep)),
      counters_(counters),
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

OpenSslLayer::~OpenSslLayer() {
  // A connection that ends without its closing alerts (most clients just
  // close) would take its session out of the cache: unless the session
  // failed, it stays resumable, as with nginx.
  if (established_ && !broken_) SSL_set_shutdown(ssl_, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
  SSL_free(ssl_);
}

net::SecureLayer::Status OpenSslLayer::receive(net::Buffer& from_peer, net::Buffer& plain, net::Buffer& to_send) {
  Lend lend(&in_, &from_peer, &out_, &to_send);
  if (!first_bytes_checked_ && !from_peer.empty()) {
    first_bytes_checked_ = true;
    const auto first = static_cast<unsigned char>(from_peer.peek()[0]);
    if (first != 0x16) {  // a TLS handshake record starts with its type, 22
      from_peer.retrieve_all();
      counters_->failed.fetch_add(1, std::memory_order_relaxed);
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
      // Once all that came is read, asking again would only hear "want
      // read" (a record header looked for, the BIO tried, the error
      // looked up): a few hundred instructions a batch.
      if (from_peer.empty() && SSL_has_pending(ssl_) == 0) break;
      continue;
    }
    const int error = SSL_get_error(ssl_, n);
    if (error == SSL_ERROR_WANT_READ) break;
    if (error == SSL_ERROR_ZERO_RETURN) return Status::kPeerClosed;
    return failed("read", to_send);
  }
  // The peer asks us to update our keys (TLS 1.3), which the kernel,
  // holding them, cannot: OpenSSL would answer before our next write, and
  // we write no more through it.
  if (kernel_sends_ && SSL_get_key_update_type(ssl_) != SSL_KEY_UPDATE_NONE) {
    TERN_LOG_DEBUG("TLS: the peer asked for a key update, which kernel TLS cannot make: closing");
    broken_ = true;
    return Status::kFailed;
  }
  return Status::kOk;
}

net::SecureLayer::Status OpenSslLayer::start(net::Buffer& to_send) {
  if (established_ || SSL_is_server(ssl_) == 1) return Status::kOk;
  Lend lend(&in_, nullptr, &out_, &to_send);
  return handshake(to_send);
}

net::SecureLayer::Status OpenSslLayer::handshake(net::Buffer& to_send) {
  ERR_clear_error();
  const int done = SSL_do_handshake(ssl_);
  if (done != 1) {
    const int error = SSL_get_error(ssl_, done);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return Status::kOk;
    return failed("handshake", to_send);
  }
  established_ = true;
  note_peer_certificate();
  counters_->handshakes.fetch_add(1, std::memory_order_relaxed);
  if (SSL_session_reused(ssl_) == 1) counters_->resumed.fetch_add(1, std::memory_order_relaxed);
  if (SSL_is_server(ssl_) == 1 && application_protocol() == "acme-tls/1") {
    // An ACME CA's TLS-ALPN-01 validation (RFC 8737): the handshake was
    // all it wanted. Closed, as the CA closes too.
    TERN_LOG_DEBUG("TLS: an ACME TLS-ALPN-01 validation for {}", server_name());
    (void)SSL_shutdown(ssl_);
    ERR_clear_error();
    return Status::kFinish;
  }
  return Status::kOk;
}

net::SecureLayer::Status OpenSslLayer::send(const char* data, size_t n, net::Buffer& to_send) {
  if (n == 0) return Status::kOk;
  Lend lend(&in_, nullptr, &out_, &to_send);
  // The queue is empty unless something left an error behind: clearing
  // it whole costs OpenSSL 3 more than a small record's encryption does
  // (about 840 instructions), looking costs little.
  if (ERR_peek_error() != 0) ERR_clear_error();
  const int written = SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(n, INT_MAX)));
  if (written <= 0 || static_cast<size_t>(written) != n) return failed("write", to_send);
  return Status::kOk;
}

namespace {

// A name in RFC 2253's form, as nginx's $ssl_client_s_dn.
std::string name_text(const X509_NAME* name) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return {};
  std::string text;
  if (X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253) >= 0) {
    char* data = nullptr;
    const long length = BIO_get_mem_data(bio, &data);
    if (length > 0) text.assign(data, static_cast<size_t>(length));
  }
  BIO_free(bio);
  return text;
}

std::string hex(const unsigned char* data, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 15]);
  }
  return out;
}

}  // namespace

void OpenSslLayer::note_peer_certificate() {
  if ((SSL_get_verify_mode(ssl_) & SSL_VERIFY_PEER) == 0 || SSL_is_server(ssl_) != 1) return;
  peer_ = std::make_unique<net::PeerCertificate>();
  // A server context that asks for certificates names what it verifies
  // against in its app data (tls/server_context.cc).
  if (const auto* demands = static_cast<const std::string*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl_)))) {
    peer_->demands = *demands;
  }
  // A resumed session keeps the certificate and what verifying it found.
  X509* cert = SSL_get1_peer_certificate(ssl_);
  if (cert == nullptr) return;
  const long result = SSL_get_verify_result(ssl_);
  peer_->verify = result == X509_V_OK ? "SUCCESS" : std::string("FAILED:") + X509_verify_cert_error_string(result);
  peer_->subject = name_text(X509_get_subject_name(cert));
  peer_->issuer = name_text(X509_get_issuer_name(cert));
  if (BIGNUM* serial = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr)) {
    if (char* text = BN_bn2hex(serial)) {
      peer_->serial = text;
      OPENSSL_free(text);
    }
    BN_free(serial);
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (X509_digest(cert, EVP_sha1(), digest, &length) == 1) peer_->fingerprint = hex(digest, length);
  X509_free(cert);
  ERR_clear_error();
}

void OpenSslLayer::release_buffers() { (void)SSL_free_buffers(ssl_); }

void OpenSslLayer::close(net::Buffer& to_send) {
  Lend lend(&in_, nullptr, &out_, &to_send);
  (void)SSL_shutdown(ssl_);
  ERR_clear_error();
}

net::SecureLayer::Status OpenSslLayer::refuse_plain_http(net::Buffer& to_send) {
  std::string head = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/html\r\nContent-Length: " +
                     std::to_string(kPlainHttpBody.size()) + "\r\nConnection: close\r\n\r\n";
  to_send.append(head.data(), head.size());
  to_send.append(kPlainHttpBody.data(), kPlainHttpBody.size());
  TERN_LOG_DEBUG("TLS: plain HTTP on an HTTPS address, answered 400");
  return Status::kFinish;
}

net::SecureLayer::Status OpenSslLayer::failed(const char* what, net::Buffer& to_send) {
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
  if (!established_) counters_->failed.fetch_add(1, std::memory_order_relaxed);
  // An alert the peer should see goes out before the close.
  return to_send.empty() ? Status::kFailed : Status::kFinish;
}

std::string_view OpenSslLayer::protocol() const { return SSL_get_version(ssl_); }

std::string_view OpenSslLayer::cipher() const {
  const char* name = SSL_get_cipher_name(ssl_);
  return name != nullptr ? name : "";
}

std::string_view OpenSslLayer::server_name() const {
  const char* name = SSL_get_servername(ssl_, TLSEXT_NAMETYPE_host_name);
  return name != nullptr ? name : "";
}

std::string_view OpenSslLayer::application_protocol() const {
  const unsigned char* data = nullptr;
  unsigned int length = 0;
  SSL_get0_alpn_selected(ssl_, &data, &length);
  return data != nullptr ? std::string_view(reinterpret_cast<const char*>(data), length) : std::string_view();
}

bool OpenSslLayer::resumed() const { return SSL_session_reused(ssl_) == 1; }

bool kernel_tls_available() {
  static const bool available = [] {
    // The kernel refuses TLS on a socket not yet connected (ENOTCONN) once
    // it has it, after loading its module where the process may (root, or
    // CAP_NET_ADMIN: at start, before privileges drop); ENOENT: it has none.
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    const int rc = ::setsockopt(fd, SOL_TCP, TCP_ULP, "tls", sizeof "tls");
    const int err = errno;
    ::close(fd);
    return rc == 0 || err == ENOTCONN;
  }();
  return available;
}

std::string openssl_reason() {
  const unsigned long code = ERR_get_error();
  const char* reason = code != 0 ? ERR_reason_error_string(code) : nullptr;
  ERR_clear_error();
  return reason != nullptr ? reason : "unknown error";
}

void throw_openssl_error(std::string_view doing) {
  std::string message(doing);
  message += ": ";
  message += openssl_reason();
  throw std::runtime_error(message);
}

}  // namespace tern::tls
