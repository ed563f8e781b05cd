// HttpsClient against a TLS server of the test's own (OpenSSL on a thread,
// one canned response a connection, with a self-signed certificate for
// "localhost" that the client trusts as its ca_root): what it sends, the
// three ways a body is framed, and the certificates it refuses.
#include "acme/https_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "acme/certificates.h"
#include "support/free_port.h"

namespace tern::acme {
namespace {

// Serves `response` to each of `connections` clients in turn, keeping what
// the last one sent (its head and the body its Content-Length names).
class CannedServer {
 public:
  CannedServer(const PemPair& pair, std::string response, int connections)
      : response_(std::move(response)) {
    ctx_ = SSL_CTX_new(TLS_server_method());
    BIO* cert = BIO_new_mem_buf(pair.cert.data(), static_cast<int>(pair.cert.size()));
    BIO* key = BIO_new_mem_buf(pair.key.data(), static_cast<int>(pair.key.size()));
    X509* x = PEM_read_bio_X509(cert, nullptr, nullptr, nullptr);
    EVP_PKEY* k = PEM_read_bio_PrivateKey(key, nullptr, nullptr, nullptr);
    SSL_CTX_use_certificate(ctx_, x);
    SSL_CTX_use_PrivateKey(ctx_, k);
    X509_free(x);
    EVP_PKEY_free(k);
    BIO_free(cert);
    BIO_free(key);
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    ::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    ::listen(listener_, 8);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &size);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this, connections] {
      for (int i = 0; i < connections; ++i) serve_one();
    });
  }
  ~CannedServer() {
    thread_.join();
    ::close(listener_);
    SSL_CTX_free(ctx_);
  }
  int port() const { return port_; }
  const std::string& received() const { return received_; }  // after the client is done

 private:
  void serve_one() {
    const int fd = ::accept(listener_, nullptr, nullptr);
    SSL* ssl = SSL_new(ctx_);
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) == 1) {
      std::string in;
      char buffer[4096];
      size_t got = 0;
      size_t end = std::string::npos;
      while (end == std::string::npos && SSL_read_ex(ssl, buffer, sizeof buffer, &got) == 1) {
        in.append(buffer, got);
        end = in.find("\r\n\r\n");
      }
      const size_t length_at = in.find("Content-Length: ");
      const size_t length = length_at < end ? std::stoul(in.substr(length_at + 16)) : 0;
      while (end != std::string::npos && in.size() < end + 4 + length &&
             SSL_read_ex(ssl, buffer, sizeof buffer, &got) == 1) {
        in.append(buffer, got);
      }
      received_ = in;
      size_t written = 0;
      SSL_write_ex(ssl, response_.data(), response_.size(), &written);
      SSL_shutdown(ssl);
    }
    SSL_free(ssl);
    ::close(fd);
  }

  std::string response_;
  SSL_CTX* ctx_ = nullptr;
  int listener_ = -1;
  int port_ = 0;
  std::string received_;
  std::thread thread_;
};

class HttpsClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("tern-acme-root-" + std::to_string(::getpid()) + ".pem");
    std::ofstream(root_) << pair_.cert;
  }
  void TearDown() override { std::filesystem::remove(root_); }

  std::string url(const CannedServer& server, std::string_view path) const {
    return "https://localhost:" + std::to_string(server.port()) + std::string(path);
  }

  const PemPair pair_ = make_self_signed({"localhost"}, std::chrono::hours(1));
  std::filesystem::path root_;
};

TEST_F(HttpsClientTest, SendsTheRequestAndReadsABodyOfAContentLength) {
  CannedServer server(pair_, "HTTP/1.1 201 Created\r\nLocation: https://ca/acct/1\r\nReplay-Nonce: n2\r\n"
                             "Content-Length: 11\r\n\r\n{\"ok\":true}",
                      1);
  HttpsClient client({.ca_root = root_.string(), .user_agent = "tern/test"});
  const HttpsClient::Response r =
      client.send("POST", url(server, "/acme/new-acct?x=1"), "application/jose+json", "{\"a\":1}");
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.field("location"), "https://ca/acct/1");
  EXPECT_EQ(r.field("Replay-Nonce"), "n2");
  EXPECT_EQ(r.body, "{\"ok\":true}");
  const std::string& sent = server.received();
  EXPECT_TRUE(sent.starts_with("POST /acme/new-acct?x=1 HTTP/1.1\r\n")) << sent;
  EXPECT_NE(sent.find("\r\nHost: localhost:" + std::to_string(server.port()) + "\r\n"), std::string::npos);
  EXPECT_NE(sent.find("\r\nUser-Agent: tern/test\r\n"), std::string::npos);
  EXPECT_NE(sent.find("\r\nContent-Type: application/jose+json\r\nContent-Length: 7\r\n"), std::string::npos);
  EXPECT_TRUE(sent.ends_with("\r\n\r\n{\"a\":1}"));
}

TEST_F(HttpsClientTest, ReadsChunkedAndCloseDelimitedBodies) {
  {
    CannedServer server(pair_, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", 1);
    HttpsClient client({.ca_root = root_.string()});
    EXPECT_EQ(client.send("GET", url(server, "/directory")).body, "hello world");
  }
  {
    CannedServer server(pair_, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n-----BEGIN CERTIFICATE-----", 1);
    HttpsClient client({.ca_root = root_.string()});
    const HttpsClient::Response r = client.send("GET", url(server, "/cert/1"));
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "-----BEGIN CERTIFICATE-----");
  }
}

TEST_F(HttpsClientTest, RefusesACertificateItDoesNotTrustOrThatNamesAnotherHost) {
  const std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
  {
    CannedServer server(pair_, ok, 1);
    HttpsClient client({});  // the system's roots: a self-signed certificate is not among them
    try {
      client.send("GET", url(server, "/"));
      FAIL() << "an untrusted certificate was taken";
    } catch (const HttpsClient::Failure& e) {
      EXPECT_NE(std::string(e.what()).find("certificate"), std::string::npos) << e.what();
    }
  }
  {
    const PemPair other = make_self_signed({"ca.example"}, std::chrono::hours(1));
    CannedServer server(other, ok, 1);
    const std::filesystem::path other_root = root_.string() + ".other";
    std::ofstream(other_root) << other.cert;
    HttpsClient client({.ca_root = other_root.string()});
    EXPECT_THROW(client.send("GET", url(server, "/")), HttpsClient::Failure);
    std::filesystem::remove(other_root);
  }
}

TEST_F(HttpsClientTest, FailsClearlyWithoutAServerOrAnHttpsUrl) {
  HttpsClient client({.ca_root = root_.string(), .timeout = std::chrono::milliseconds(2000)});
  const int closed = testing::free_port();
  EXPECT_THROW(client.send("GET", "https://127.0.0.1:" + std::to_string(closed) + "/"), HttpsClient::Failure);
  EXPECT_THROW(client.send("GET", "http://localhost/"), HttpsClient::Failure);
  EXPECT_THROW(client.send("GET", "https://[::1/"), HttpsClient::Failure);
  EXPECT_THROW(HttpsClient({.ca_root = "/nonexistent/root.pem"}), std::runtime_error);
}

}  // namespace
}  // namespace tern::acme
