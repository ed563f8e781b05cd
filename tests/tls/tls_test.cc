// TLS through TcpServer and TcpConnection (both I/O backends: ctest runs
// this with TERN_IO=epoll and io_uring), against OpenSSL clients in the test
// thread: the handshake, SNI, ALPN, resumption by ticket and by session id,
// files, and what a hostile or confused client gets.
#include "tls/server_context.h"

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <any>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "net/event_loop.h"
#include "net/tcp_connection.h"
#include "net/tcp_server.h"
#include "support/eventually.h"
#include "support/loop_runner.h"
#include "support/random_bytes.h"
#include "support/raw_socket.h"
#include "support/temp_dir.h"
#include "support/test_cert.h"

namespace tern::tls {
namespace {

using namespace std::chrono_literals;
using tern::testing::LoopRunner;
using tern::testing::RawClient;

using tern::testing::random_bytes;

using tern::testing::make_cert;
using tern::testing::TestCert;

Identity identity_of(const TestCert& c) {
  Identity identity;
  identity.pairs.push_back({c.cert, c.key});
  return identity;
}

// A blocking OpenSSL client over a connected socket.
class Client {
 public:
  struct Options {
    std::string server_name;
    std::string alpn;  // one protocol, or none
    int max_version = 0;  // 0: the library's
    int min_version = 0;
    bool no_tickets = false;
    SSL_SESSION* resume = nullptr;  // not owned

    Options& sni(std::string name) { server_name = std::move(name); return *this; }
    Options& offer(std::string protocol) { alpn = std::move(protocol); return *this; }
    Options& versions(int min, int max) { min_version = min; max_version = max; return *this; }
    Options& without_tickets(bool off = true) { no_tickets = off; return *this; }
  };

  Client(uint16_t port, const Options& options) : socket_(port) {
    // One context for every client, as a browser has: a session resumes
    // from the context that made it.
    static SSL_CTX* const shared = [] {
      SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
      SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL);
      SSL_CTX_sess_set_new_cb(ctx, [](SSL*, SSL_SESSION*) {
        ++sessions_received_;
        return 0;  // not kept: session() asks the connection
      });
      return ctx;
    }();
    ssl_ = SSL_new(shared);
    if (options.max_version != 0) SSL_set_max_proto_version(ssl_, options.max_version);
    if (options.min_version != 0) SSL_set_min_proto_version(ssl_, options.min_version);
    if (options.no_tickets) SSL_set_options(ssl_, SSL_OP_NO_TICKET);
    SSL_set_fd(ssl_, socket_.fd());
    if (!options.server_name.empty()) SSL_set_tlsext_host_name(ssl_, options.server_name.c_str());
    if (!options.alpn.empty()) {
      std::string wire(1, static_cast<char>(options.alpn.size()));
      wire += options.alpn;
      SSL_set_alpn_protos(ssl_, reinterpret_cast<const unsigned char*>(wire.data()),
                          static_cast<unsigned>(wire.size()));
    }
    if (options.resume != nullptr) SSL_set_session(ssl_, options.resume);
    timeval timeout{10, 0};
    ::setsockopt(socket_.fd(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(socket_.fd(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    connected_ = SSL_connect(ssl_) == 1;
    ERR_clear_error();
  }
  ~Client() {
    if (connected_) (void)SSL_shutdown(ssl_);  // the session stays resumable
    SSL_free(ssl_);
  }

  bool connected() const { return connected_; }
  bool resumed() const { return SSL_session_reused(ssl_) == 1; }
  std::string protocol() const { return SSL_get_version(ssl_); }
  std::string alpn() const {
    const unsigned char* data = nullptr;
    unsigned int length = 0;
    SSL_get0_alpn_selected(ssl_, &data, &length);
    return data != nullptr ? std::string(reinterpret_cast<const char*>(data), length) : "";
  }
  std::string peer_name() const {
    X509* peer = SSL_get1_peer_certificate(ssl_);
    if (peer == nullptr) return "";
    char name[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, name, sizeof name);
    X509_free(peer);
    return name;
  }
  // Sessions the server has handed to every client so far (in TLS 1.3 one
  // per NewSessionTicket).
  static int sessions_received() { return sessions_received_; }

  // The session, for a later connection to resume (the caller frees it).
  SSL_SESSION* session() const { return SSL_get1_session(ssl_); }

  bool write(const std::string& data) {
    return SSL_write(ssl_, data.data(), static_cast<int>(data.size())) == static_cast<int>(data.size());
  }
  // Up to `n` bytes, until EOF or an error.
  std::string read(size_t n) {
    std::string out;
    char chunk[16384];
    while (out.size() < n) {
      const int got = SSL_read(ssl_, chunk, static_cast<int>(std::min(sizeof chunk, n - out.size())));
      if (got <= 0) break;
      out.append(chunk, static_cast<size_t>(got));
    }
    return out;
  }
  // Ends the stream with TCP's FIN alone (no close_notify), the socket
  // left open for reading.
  void end_without_close_notify() {
    socket_.shutdown_write();
    connected_ = false;  // nothing more is written (SSL_shutdown would be)
  }
  // TLS 1.3 tickets arrive after the handshake: a read that finds none
  // waiting takes them in.
  void take_tickets() {
    char byte;
    timeval timeout{0, 200000};
    ::setsockopt(socket_.fd(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    (void)SSL_peek(ssl_, &byte, 1);
    ERR_clear_error();
  }

 private:
  static inline int sessions_received_ = 0;  // clients run on the test thread
  RawClient socket_;
  SSL* ssl_ = nullptr;
  bool connected_ = false;
};

// A temporary file with known content, open for reading.
class TempFile {
 public:
  TempFile(const std::string& dir, const std::string& content) : path_(dir + "/body.bin") {
    FILE* f = std::fopen(path_.c_str(), "w");
    std::fwrite(content.data(), 1, content.size(), f);
    std::fclose(f);
    fd_ = ::open(path_.c_str(), O_RDONLY);
  }
  ~TempFile() { ::close(fd_); }
  int fd() const { return fd_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// An echo server on its own loop, speaking TLS with `settings`.
class TlsFixture : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = std::make_unique<tern::testing::TempDir>(); }

  void start(Settings settings, std::function<void(net::TcpServer&)> configure = nullptr,
             net::TcpServerOptions options = {}) {
    context_ = std::make_shared<ServerContext>(std::move(settings));
    runner_.run([&] {
      server_ = std::make_unique<net::TcpServer>(runner_.loop(), net::InetAddress(0, true), options);
      server_->set_secure_context(net::InetAddress(0, true), context_);
      if (configure) {
        configure(*server_);
      } else {
        server_->set_message_callback([](net::TcpConnection& conn, net::Buffer& in) { conn.send(in); });
      }
      auto started = server_->start();
      ASSERT_TRUE(started.ok()) << started.error().message();
    });
    port_ = server_->listen_address().port();
  }
  void TearDown() override {
    runner_.run([&] { server_.reset(); });
  }
  // A file the loop may read until the server is gone: it is closed after
  // TearDown, never while the loop can still be reading it.
  int open_file(const std::string& content) {
    file_ = std::make_unique<TempFile>(dir(), content);
    return file_->fd();
  }
  std::string dir() const { return dir_->path(); }

  std::unique_ptr<tern::testing::TempDir> dir_;
  LoopRunner runner_;
  std::shared_ptr<ServerContext> context_;
  std::unique_ptr<net::TcpServer> server_;
  std::unique_ptr<TempFile> file_;
  uint16_t port_ = 0;
};

Settings one_identity(const TestCert& cert) {
  Settings settings;
  settings.identities.push_back(identity_of(cert));
  settings.tickets = std::make_shared<TicketKeys>();
  return settings;
}

TEST_F(TlsFixture, BytesEchoThroughTls13WithAlpn) {
  start(one_identity(make_cert(dir(), "a.test")));
  Client client(port_, Client::Options().offer("http/1.1"));
  ASSERT_TRUE(client.connected());
  EXPECT_EQ(client.protocol(), "TLSv1.3");
  EXPECT_EQ(client.alpn(), "http/1.1");
  const std::string data = random_bytes(1 << 20, 3);
  for (size_t at = 0; at < data.size(); at += 100000) {
    ASSERT_TRUE(client.write(data.substr(at, 100000)));
  }
  EXPECT_TRUE(client.read(data.size()) == data);
  EXPECT_EQ(context_->stats().handshakes, 1u);
}

TEST_F(TlsFixture, Tls12WorksAndOlderVersionsAreRefused) {
  start(one_identity(make_cert(dir(), "a.test")));
  Client v12(port_, Client::Options().versions(0, TLS1_2_VERSION));
  ASSERT_TRUE(v12.connected());
  EXPECT_EQ(v12.protocol(), "TLSv1.2");
  ASSERT_TRUE(v12.write("ping"));
  EXPECT_EQ(v12.read(4), "ping");
  Client v11(port_, Client::Options().versions(0, TLS1_1_VERSION));
  EXPECT_FALSE(v11.connected());
}

TEST_F(TlsFixture, AlpnWithNothingInCommonGoesOnWithoutIt) {
  start(one_identity(make_cert(dir(), "a.test")));
  Client client(port_, Client::Options().offer("spdy/3"));
  ASSERT_TRUE(client.connected());
  EXPECT_EQ(client.alpn(), "");
}

TEST_F(TlsFixture, ServerNamePicksTheIdentityAndAnUnknownOneGetsTheDefault) {
  Settings settings;
  settings.identities.push_back(identity_of(make_cert(dir(), "a.test")));
  settings.identities.push_back(identity_of(make_cert(dir(), "b.test")));
  settings.default_identity = 0;
  settings.select = [](std::string_view name) -> std::optional<size_t> {
    if (name == "b.test") return 1;
    return std::nullopt;
  };
  start(std::move(settings));
  EXPECT_EQ(Client(port_, Client::Options().sni("b.test")).peer_name(), "b.test");
  EXPECT_EQ(Client(port_, Client::Options().sni("B.Test.")).peer_name(), "b.test");
  EXPECT_EQ(Client(port_, Client::Options().sni("a.test")).peer_name(), "a.test");
  EXPECT_EQ(Client(port_, Client::Options().sni("other.test")).peer_name(), "a.test");
  EXPECT_EQ(Client(port_, Client::Options()).peer_name(), "a.test");
}

std::string file_text(const std::string& path) {
  std::string out;
  FILE* f = std::fopen(path.c_str(), "r");
  char chunk[4096];
  size_t n = 0;
  while (f != nullptr && (n = std::fread(chunk, 1, sizeof chunk, f)) > 0) out.append(chunk, n);
  if (f != nullptr) std::fclose(f);
  return out;
}

TEST_F(TlsFixture, AnAcmeTlsAlpnValidationGetsTheChallengeCertificateAndIsClosedAfterTheHandshake) {
  Settings settings = one_identity(make_cert(dir(), "a.test"));
  settings.alpn = {"h2", "http/1.1"};
  auto acme = std::make_shared<AlpnChallenges>();
  settings.acme = acme;
  start(std::move(settings));
  const TestCert challenge = make_cert(dir(), "challenge.test");
  acme->add("a.test", file_text(challenge.cert), file_text(challenge.key));
  EXPECT_THROW(acme->add("b.test", "not a certificate", "not a key"), std::runtime_error);
  {
    Client validator(port_, Client::Options().sni("A.test.").offer("acme-tls/1"));
    ASSERT_TRUE(validator.connected());
    EXPECT_EQ(validator.peer_name(), "challenge.test");
    EXPECT_EQ(validator.alpn(), "acme-tls/1");
    EXPECT_EQ(validator.read(1), "");  // closed by the server, nothing sent
  }
  // Others are served as ever: an ordinary client of the name, and the
  // protocol for a name without a challenge.
  Client browser(port_, Client::Options().sni("a.test").offer("http/1.1"));
  ASSERT_TRUE(browser.connected());
  EXPECT_EQ(browser.peer_name(), "a.test");
  EXPECT_EQ(browser.alpn(), "http/1.1");
  ASSERT_TRUE(browser.write("ping"));
  EXPECT_EQ(browser.read(4), "ping");
  Client other(port_, Client::Options().sni("c.test").offer("acme-tls/1"));
  ASSERT_TRUE(other.connected());
  EXPECT_EQ(other.peer_name(), "a.test");
  EXPECT_EQ(other.alpn(), "");
  // Withdrawn: the site's certificate again.
  acme->remove("a.test");
  Client late(port_, Client::Options().sni("a.test").offer("acme-tls/1"));
  ASSERT_TRUE(late.connected());
  EXPECT_EQ(late.peer_name(), "a.test");
  EXPECT_EQ(late.alpn(), "");
}

TEST_F(TlsFixture, AnEcdsaAndAnRsaPairSitSideBySide) {
  const TestCert ec = make_cert(dir(), "a.test");
  const TestCert rsa = make_cert(dir(), "a.test", /*rsa=*/true);
  Settings settings;
  Identity identity;
  identity.pairs = {{ec.cert, ec.key}, {rsa.cert, rsa.key}};
  settings.identities.push_back(identity);
  start(std::move(settings));
  Client client(port_, Client::Options().versions(0, TLS1_2_VERSION));
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.write("x"));
  EXPECT_EQ(client.read(1), "x");
}

TEST_F(TlsFixture, SessionsResumeByTicketAndBySessionId) {
  start(one_identity(make_cert(dir(), "a.test")));
  for (const bool tickets : {true, false}) {
    for (const int version : {TLS1_2_VERSION, TLS1_3_VERSION}) {
      SCOPED_TRACE(std::string(tickets ? "ticket" : "session id") + (version == TLS1_2_VERSION ? " 1.2" : " 1.3"));
      Client::Options options = Client::Options().versions(version, version).without_tickets(!tickets);
      SSL_SESSION* session = nullptr;
      {
        Client first(port_, options);
        ASSERT_TRUE(first.connected());
        EXPECT_FALSE(first.resumed());
        first.take_tickets();
        session = first.session();
      }
      options.resume = session;
      Client second(port_, options);
      ASSERT_TRUE(second.connected());
      EXPECT_TRUE(second.resumed());
      ASSERT_TRUE(second.write("after"));
      EXPECT_EQ(second.read(5), "after");
      SSL_SESSION_free(session);
    }
  }
  EXPECT_EQ(context_->stats().resumed, 4u);
}

// One ticket per TLS 1.3 handshake (OpenSSL's default is two), and a
// resumed connection gets a fresh one: a client always has one to use.
TEST_F(TlsFixture, ATls13HandshakeGivesOneTicketAndAResumptionAFreshOne) {
  start(one_identity(make_cert(dir(), "a.test")));
  const int before = Client::sessions_received();
  SSL_SESSION* session = nullptr;
  {
    Client first(port_, Client::Options().versions(TLS1_3_VERSION, TLS1_3_VERSION));
    ASSERT_TRUE(first.connected());
    ASSERT_TRUE(first.write("one"));
    EXPECT_EQ(first.read(3), "one");
    first.take_tickets();
    EXPECT_EQ(Client::sessions_received() - before, 1);
    session = first.session();
  }
  Client::Options options = Client::Options().versions(TLS1_3_VERSION, TLS1_3_VERSION);
  options.resume = session;
  Client second(port_, options);
  ASSERT_TRUE(second.connected());
  EXPECT_TRUE(second.resumed());
  ASSERT_TRUE(second.write("two"));
  EXPECT_EQ(second.read(3), "two");
  second.take_tickets();
  EXPECT_EQ(Client::sessions_received() - before, 2);
  SSL_SESSION_free(session);
}

TEST_F(TlsFixture, TicketsOfThePreviousKeyResumeAndOlderOnesDoNot) {
  Settings settings = one_identity(make_cert(dir(), "a.test"));
  settings.tickets = std::make_shared<TicketKeys>(std::chrono::seconds(1));
  settings.session_cache_entries = 0;  // only tickets resume
  start(std::move(settings));
  Client::Options options = Client::Options().versions(0, TLS1_2_VERSION);
  SSL_SESSION* session = nullptr;
  {
    Client first(port_, options);
    ASSERT_TRUE(first.connected());
    session = first.session();
  }
  std::this_thread::sleep_for(1100ms);  // one rotation: the key is the previous one
  options.resume = session;
  {
    Client second(port_, options);
    ASSERT_TRUE(second.connected());
    EXPECT_TRUE(second.resumed());
  }
  std::this_thread::sleep_for(2100ms);  // two more: the key is gone
  Client third(port_, options);
  ASSERT_TRUE(third.connected());
  EXPECT_FALSE(third.resumed());
  SSL_SESSION_free(session);
}

TEST_F(TlsFixture, PlainHttpGetsA400ThatSaysSoAndTheConnectionCloses) {
  start(one_identity(make_cert(dir(), "a.test")));
  RawClient client(port_);
  ASSERT_TRUE(client.send_all("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"));
  bool eof = false;
  const std::string answer = client.read_to_eof(&eof, 10s);
  EXPECT_TRUE(eof);
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 400 Bad Request\r\n")) << answer;
  EXPECT_NE(answer.find("HTTPS"), std::string::npos);
  EXPECT_NE(answer.find("Connection: close"), std::string::npos);
}

TEST_F(TlsFixture, GarbageAndATruncatedHelloAreClosedAndOthersAreServed) {
  start(one_identity(make_cert(dir(), "a.test")));
  {
    RawClient garbage(port_);
    ASSERT_TRUE(garbage.send_all(std::string("\x00\x01\x02\x03 not tls at all", 20)));
    bool eof = false;
    EXPECT_EQ(garbage.read_to_eof(&eof, 10s), "");
    EXPECT_TRUE(eof);
  }
  {
    // A record header promising more than comes, then a half-close.
    RawClient truncated(port_);
    ASSERT_TRUE(truncated.send_all(std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11)));
    truncated.shutdown_write();
    bool eof = false;
    (void)truncated.read_to_eof(&eof, 10s);
    EXPECT_TRUE(eof);
  }
  {
    // A well-formed record that is not a ClientHello: an alert back, then the end.
    RawClient wrong(port_);
    ASSERT_TRUE(wrong.send_all(std::string("\x16\x03\x01\x00\x04\x02\x00\x00\x00", 9)));
    bool eof = false;
    const std::string answer = wrong.read_to_eof(&eof, 10s);
    EXPECT_TRUE(eof);
    ASSERT_FALSE(answer.empty());
    EXPECT_EQ(answer[0], '\x15');  // an alert record
  }
  Client client(port_, Client::Options());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.write("still here"));
  EXPECT_EQ(client.read(10), "still here");
}

TEST_F(TlsFixture, AClientSilentInTheHandshakeIsClosedAtTheTimeout) {
  Settings settings = one_identity(make_cert(dir(), "a.test"));
  settings.handshake_timeout = 300ms;
  start(std::move(settings));
  RawClient silent(port_);
  // Half a ClientHello's record header, then nothing.
  ASSERT_TRUE(silent.send_all(std::string("\x16\x03", 2)));
  const auto began = std::chrono::steady_clock::now();
  bool eof = false;
  (void)silent.read_to_eof(&eof, 10s);
  EXPECT_TRUE(eof);
  EXPECT_LT(std::chrono::steady_clock::now() - began, 5s);
  // An established connection is not subject to it.
  Client client(port_, Client::Options());
  ASSERT_TRUE(client.connected());
  std::this_thread::sleep_for(600ms);
  ASSERT_TRUE(client.write("late"));
  EXPECT_EQ(client.read(4), "late");
}


TEST_F(TlsFixture, FileRegionsAndBytesArriveInOrderOverTls) {
  const std::string content = random_bytes(5 * 1024 * 1024 + 123, 9);
  const int fd = open_file(content);
  start(one_identity(make_cert(dir(), "a.test")), [&](net::TcpServer& server) {
    server.set_message_callback([&](net::TcpConnection& conn, net::Buffer& in) {
      in.retrieve_all();
      conn.send("HEAD");
      conn.send_file(net::FileRegion{fd, 7, content.size() - 7, nullptr, nullptr});
      conn.send("TAIL");
      conn.close_after_write();
    });
  });
  Client client(port_, Client::Options());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.write("go"));
  const std::string got = client.read(content.size() + 100);
  ASSERT_EQ(got.size(), 4 + content.size() - 7 + 4);
  EXPECT_TRUE(got == "HEAD" + content.substr(7) + "TAIL");
}

// Edge-triggered, a connection reads until the socket is drained: each read
// goes through the layer before the next, and files still leave in steps.
TEST_F(TlsFixture, EdgeTriggeredConnectionsCarryTlsToo) {
  const std::string content = random_bytes(2 * 1024 * 1024 + 5, 4);
  const int fd = open_file(content);
  net::TcpServerOptions options;
  options.trigger = net::TriggerMode::kEdge;
  start(
      one_identity(make_cert(dir(), "a.test")),
      [&](net::TcpServer& server) {
        server.set_message_callback([&](net::TcpConnection& conn, net::Buffer& in) {
          if (in.view().find("file") != std::string_view::npos) {
            in.retrieve_all();
            conn.send_file(net::FileRegion{fd, 0, content.size(), nullptr, nullptr});
            return;
          }
          conn.send(in);
        });
      },
      options);
  Client client(port_, Client::Options());
  ASSERT_TRUE(client.connected());
  const std::string data = random_bytes(1 << 20, 5);
  ASSERT_TRUE(client.write(data));
  EXPECT_TRUE(client.read(data.size()) == data);
  ASSERT_TRUE(client.write("file"));
  EXPECT_TRUE(client.read(content.size()) == content);
}

// Edge-triggered, a peer's end that comes with its last bytes is read
// after them: a read that came short does not mean the socket is drained
// when the event said the peer had ended (no later edge would report it).
// 40 peers send 64 KiB and 100 B to 1 MiB more and end with a FIN alone;
// each connection must close with every byte delivered.
TEST_F(TlsFixture, EdgeTriggeredConnectionsReadThePeersEndThatCameWithTheLastBytes) {
  struct Seen {
    std::string bytes;
    size_t at_close = 0;
  };
  std::vector<Seen> seen(40);
  std::atomic<int> closed{0};
  // The server's callbacks see these locals: it goes before they do, even
  // when an assertion ends the test early.
  const std::shared_ptr<void> stop_first(nullptr, [this](void*) { runner_.run([this] { server_.reset(); }); });
  net::TcpServerOptions options;
  options.trigger = net::TriggerMode::kEdge;
  start(
      one_identity(make_cert(dir(), "a.test")),
      [&](net::TcpServer& server) {
        server.set_connection_callback([&](net::TcpConnection& conn) {
          if (conn.connected() || !conn.context().has_value()) return;
          Seen& s = seen[static_cast<size_t>(std::any_cast<int>(conn.context()))];
          s.at_close = s.bytes.size();
          ++closed;
        });
        server.set_message_callback([&](net::TcpConnection& conn, net::Buffer& in) {
          if (!conn.context().has_value()) {
            // The first byte of each peer's bytes says which it is.
            conn.context() = static_cast<int>(static_cast<unsigned char>(*in.peek()));
          }
          seen[static_cast<size_t>(std::any_cast<int>(conn.context()))].bytes.append(in.view());
          in.retrieve_all();
        });
      },
      options);
  std::vector<std::string> sent(seen.size());
  std::vector<std::unique_ptr<Client>> clients;
  for (size_t i = 0; i < seen.size(); ++i) {
    const size_t more[] = {100, 16 << 10, 64 << 10, 1 << 20};
    sent[i] = random_bytes((64 << 10) + more[i % 4], static_cast<uint32_t>(i + 1));
    sent[i][0] = static_cast<char>(i);
    clients.push_back(std::make_unique<Client>(port_, Client::Options()));
    ASSERT_TRUE(clients.back()->connected());
    ASSERT_TRUE(clients.back()->write(sent[i]));
    clients.back()->end_without_close_notify();
  }
  EXPECT_TRUE(tern::testing::eventually([&] { return closed.load() == static_cast<int>(seen.size()); }, 20s))
      << closed.load() << " of " << seen.size() << " connections closed";
  runner_.run([&] {
    for (size_t i = 0; i < seen.size(); ++i) {
      EXPECT_EQ(seen[i].at_close, sent[i].size()) << "connection " << i;
      EXPECT_TRUE(seen[i].bytes == sent[i]) << "connection " << i << ": the bytes came changed or out of order";
    }
  });
}

// A reader faster than the writer (here: a socket with room for the whole
// file) does not keep the loop on one connection: after a turn it encrypts
// and writes the rest after the next poll, with no event of its socket to
// wake it. (io_uring sends a step per completion: turns come by themselves.)
TEST_F(TlsFixture, AWriterWhoseSocketKeepsRoomTakesTurns) {
  const std::string content = random_bytes(6 * 1024 * 1024 + 3, 6);
  const int fd = open_file(content);
  net::TcpServerOptions options;
  options.trigger = net::TriggerMode::kEdge;
  std::promise<size_t> queued_after_first_turn;
  bool room = true;
  start(
      one_identity(make_cert(dir(), "a.test")),
      [&](net::TcpServer& server) {
        server.set_message_callback([&](net::TcpConnection& conn, net::Buffer& in) {
          in.retrieve_all();
          room = tern::testing::force_send_room(conn.fd(), 3 * content.size());
          conn.send_file(net::FileRegion{fd, 0, content.size(), nullptr, nullptr});
          queued_after_first_turn.set_value(conn.pending_output_bytes());
        });
      },
      options);
  Client client(port_, Client::Options());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.write("file"));
  const size_t queued = queued_after_first_turn.get_future().get();
  const bool by_completion = runner_.run([&] { return runner_.loop()->io_backend() == net::IoBackend::kIoUring; });
  EXPECT_TRUE(client.read(content.size()) == content);
  if (by_completion) GTEST_SKIP() << "io_uring: a send request per step";
  if (!room) GTEST_SKIP() << "SO_SNDBUFFORCE needs CAP_NET_ADMIN";
  EXPECT_GT(queued, 0u);
  EXPECT_LT(queued, content.size());
}

TEST(ServerContextTest, AKeyThatDoesNotMatchItsCertificateIsRefusedByName) {
  tern::testing::TempDir dir;
  const TestCert a = make_cert(dir.path(), "a.test");
  const TestCert b = make_cert(dir.path(), "b.test");
  Settings settings;
  Identity identity;
  identity.pairs.push_back({a.cert, b.key});
  settings.identities.push_back(identity);
  try {
    ServerContext context(std::move(settings));
    FAIL() << "loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("does not match"), std::string::npos) << e.what();
  }
}

TEST(ServerContextTest, AKeyEveryUserCanReadIsRefused) {
  tern::testing::TempDir dir;
  const TestCert a = make_cert(dir.path(), "a.test");
  ::chmod(a.key.c_str(), 0644);
  try {
    ServerContext context(one_identity(a));
    FAIL() << "loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("every user"), std::string::npos) << e.what();
  }
}

TEST(ServerContextTest, AnExpiredCertificateLoadsWithAWarning) {
  tern::testing::TempDir dir;
  const TestCert old = make_cert(dir.path(), "old.test", false, -86400 * 10, -86400);
  const TestCert fresh = make_cert(dir.path(), "new.test");
  EXPECT_NO_THROW(ServerContext context(one_identity(old)));
  const auto warnings = certificate_warnings({old.cert, old.key});
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("expired"), std::string::npos);
  EXPECT_TRUE(certificate_warnings({fresh.cert, fresh.key}).empty());
}

TEST(ServerContextTest, OnlyTls12And13AreOffered) {
  tern::testing::TempDir dir;
  Settings settings = one_identity(make_cert(dir.path(), "a.test"));
  settings.identities[0].min_protocol = "TLSv1.1";
  EXPECT_THROW(ServerContext context(std::move(settings)), std::runtime_error);
}

}  // namespace
}  // namespace tern::tls
