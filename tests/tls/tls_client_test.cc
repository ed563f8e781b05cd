// TLS on the client side: a TcpClient with a tls::ClientContext against a
// TcpServer with a tls::ServerContext (both I/O backends: ctest runs this
// with TERN_IO=epoll and io_uring). The server's certificate verified (chain
// and name), a failed handshake reported as a failed connect, sessions
// resumed by the next connection, a silent server timed out.
#include "tls/client_context.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/buffer.h"
#include "net/tcp_client.h"
#include "net/tcp_connection.h"
#include "net/tcp_server.h"
#include "support/eventually.h"
#include "support/loop_runner.h"
#include "support/temp_dir.h"
#include "support/test_cert.h"
#include "tls/server_context.h"
#include "tls/ticket_keys.h"

namespace tern::tls {
namespace {

using namespace std::chrono_literals;
using tern::testing::eventually;
using tern::testing::LoopRunner;
using tern::testing::make_cert;
using tern::testing::TestCert;

// What a client saw: the connection announced (and whether its handshake
// was over by then), bytes, a failure.
struct Outcome {
  std::mutex mu;
  int connected = 0;
  bool established_when_announced = false;
  bool resumed = false;
  std::string sni_seen_by_server;
  std::string received;
  int failures = 0;
  std::vector<std::chrono::steady_clock::time_point> failed_at;
  std::vector<bool> will_retry;
  Error error;
  std::string why;
  int close_error = -1;  // the connection's close_error() when it closed (connect()'s watch_close)
};

class TlsClientFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<tern::testing::TempDir>();
    cert_ = make_cert(dir_->path(), "up.test");
  }
  void TearDown() override {
    runner_.run([&] {
      clients_.clear();
      server_.reset();
    });
  }

  // An echo server speaking TLS with cert_ (a self-signed certificate: its
  // own CA); it answers "sni:NAME" with the name the client sent.
  void start_server() {
    Settings settings;
    Identity identity;
    identity.pairs.push_back({cert_.cert, cert_.key});
    settings.identities.push_back(identity);
    settings.tickets = std::make_shared<TicketKeys>();
    // Records of its own making only: "garble" writes one on the socket, which
    // the kernel would encrypt as a good one.
    settings.kernel_tls = false;
    auto context = std::make_shared<ServerContext>(std::move(settings));
    runner_.run([&] {
      server_ = std::make_unique<net::TcpServer>(runner_.loop(), net::InetAddress(0, true));
      server_->set_secure_context(net::InetAddress(0, true), context);
      server_->set_message_callback([](net::TcpConnection& conn, net::Buffer& in) {
        std::string text = in.retrieve_all_as_string();
        if (text == "sni?") text = "sni:" + std::string(conn.secure_layer()->server_name());
        if (text == "garble") {
          // An application data record whose bytes no key made.
          const char record[] = "\x17\x03\x03\x00\x20garbled garbled garbled garbled!";
          ASSERT_EQ(::write(conn.fd(), record, sizeof record - 1), static_cast<ssize_t>(sizeof record - 1));
          return;
        }
        conn.send(text);
      });
      auto started = server_->start();
      ASSERT_TRUE(started.ok()) << started.error().message();
    });
    port_ = server_->listen_address().port();
  }

  // A client through `context` to `port`, sending `hello` once announced;
  // it does not retry unless `connector` says so. With `watch_close`, its
  // close is recorded too: the outcome must then outlive the clients
  // (watched_).
  void connect(std::shared_ptr<ClientContext> context, Outcome* outcome, uint16_t port,
               const std::string& hello = "sni?", net::ConnectorOptions connector = {.retry = false},
               bool watch_close = false) {
    runner_.run([&] {
      net::TcpClientOptions options;
      options.secure = context;
      options.connector = connector;
      auto client = std::make_unique<net::TcpClient>(runner_.loop(), net::InetAddress(port, true), options);
      client->set_connection_callback([outcome, hello, watch_close](net::TcpConnection& conn) {
        if (!conn.connected()) {
          if (!watch_close) return;
          std::lock_guard lock(outcome->mu);
          outcome->close_error = conn.close_error();
          return;
        }
        std::lock_guard lock(outcome->mu);
        ++outcome->connected;
        outcome->established_when_announced = conn.secure() && conn.secure_layer()->established();
        outcome->resumed = conn.secure_layer()->resumed();
        conn.send(hello);
      });
      client->set_message_callback([outcome](net::TcpConnection&, net::Buffer& in) {
        std::lock_guard lock(outcome->mu);
        outcome->received += in.retrieve_all_as_string();
      });
      net::TcpClient* raw = client.get();
      client->set_connect_failed_callback([outcome, raw](const Error& error, bool will_retry) {
        std::lock_guard lock(outcome->mu);
        ++outcome->failures;
        outcome->failed_at.push_back(std::chrono::steady_clock::now());
        outcome->will_retry.push_back(will_retry);
        outcome->error = error;
        outcome->why = raw->handshake_failure();
      });
      client->connect();
      clients_.push_back(std::move(client));
    });
  }

  std::shared_ptr<ClientContext> context(const std::string& name, bool verify = true) {
    ClientSettings settings;
    settings.name = name;
    settings.verify = verify;
    settings.ca = cert_.cert;
    settings.handshake_timeout = 2s;
    return std::make_shared<ClientContext>(settings);
  }

  static bool got(Outcome& o, const std::string& text) {
    return eventually([&] {
      std::lock_guard lock(o.mu);
      return o.received == text;
    });
  }
  static bool failed(Outcome& o) {
    return eventually([&] {
      std::lock_guard lock(o.mu);
      return o.failures > 0;
    });
  }

  std::unique_ptr<tern::testing::TempDir> dir_;
  TestCert cert_;
  LoopRunner runner_;
  // A client that records its close (connect()'s watch_close) reports to an
  // outcome that outlives it: this one, kept until the clients go.
  Outcome watched_;
  std::unique_ptr<net::TcpServer> server_;
  std::vector<std::unique_ptr<net::TcpClient>> clients_;
  uint16_t port_ = 0;
};

TEST_F(TlsClientFixture, AVerifiedServerIsAnnouncedAfterTheHandshakeAndHearsTheName) {
  start_server();
  Outcome outcome;
  connect(context("up.test"), &outcome, port_);
  ASSERT_TRUE(got(outcome, "sni:up.test"));
  std::lock_guard lock(outcome.mu);
  EXPECT_EQ(outcome.connected, 1);
  EXPECT_TRUE(outcome.established_when_announced);
  EXPECT_EQ(outcome.failures, 0);
}

TEST_F(TlsClientFixture, ARecordThatFailsItsCheckClosesWithAnErrorNotAsAnEnd) {
  // A reader of a body that ends at the close must not take a session
  // broken mid-stream for the end of the body.
  start_server();
  Outcome& outcome = watched_;
  connect(context("up.test"), &outcome, port_, "garble", {.retry = false}, true);
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(outcome.mu);
    return outcome.close_error != -1;
  }));
  std::lock_guard lock(outcome.mu);
  EXPECT_EQ(outcome.connected, 1);
  EXPECT_EQ(outcome.close_error, EPROTO);
  EXPECT_EQ(outcome.received, "");
}

TEST_F(TlsClientFixture, ANameTheCertificateDoesNotCarryIsAFailedConnect) {
  start_server();
  Outcome outcome;
  connect(context("other.test"), &outcome, port_);
  ASSERT_TRUE(failed(outcome));
  std::lock_guard lock(outcome.mu);
  EXPECT_EQ(outcome.connected, 0);
  EXPECT_STREQ(outcome.error.what, "TLS handshake");
  EXPECT_NE(outcome.why.find("certificate verify failed"), std::string::npos) << outcome.why;
  EXPECT_NE(outcome.why.find("hostname mismatch"), std::string::npos) << outcome.why;
}

TEST_F(TlsClientFixture, AFailedHandshakeIsRetriedAsAFailedConnectWithGrowingDelaysUpToTheLimit) {
  // The TCP connect succeeds each time; the back-off grows all the same,
  // and max_attempts ends it, as for a connect that fails.
  start_server();
  Outcome outcome;
  connect(context("other.test"), &outcome, port_, "sni?",
          {.initial_backoff = 100ms, .max_backoff = 1000ms, .max_attempts = 3});
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(outcome.mu);
    return outcome.failures == 3;
  }));
  std::this_thread::sleep_for(600ms);
  std::lock_guard lock(outcome.mu);
  EXPECT_EQ(outcome.failures, 3) << "kept trying past max_attempts";
  EXPECT_EQ(outcome.connected, 0);
  EXPECT_EQ(outcome.will_retry, (std::vector<bool>{true, true, false}));
  // Nominal delays 100 and 200 ms, each at least half with equal jitter;
  // a retry's delay runs from the start of the round whose failure armed
  // it, which the callback may see a little later (a loaded machine).
  EXPECT_GE(outcome.failed_at[1] - outcome.failed_at[0], 30ms);
  EXPECT_GE(outcome.failed_at[2] - outcome.failed_at[1], 80ms);
  EXPECT_NE(outcome.why.find("certificate verify failed"), std::string::npos) << outcome.why;
}

TEST_F(TlsClientFixture, ACertificateFromAnotherCaIsRefusedUnlessVerificationIsOff) {
  start_server();
  const TestCert stranger = make_cert(dir_->path(), "stranger.test");
  ClientSettings settings;
  settings.name = "up.test";
  settings.ca = stranger.cert;
  Outcome refused;
  connect(std::make_shared<ClientContext>(settings), &refused, port_);
  ASSERT_TRUE(failed(refused));
  {
    std::lock_guard lock(refused.mu);
    EXPECT_NE(refused.why.find("certificate verify failed"), std::string::npos) << refused.why;
  }
  settings.verify = false;
  Outcome accepted;
  connect(std::make_shared<ClientContext>(settings), &accepted, port_);
  EXPECT_TRUE(got(accepted, "sni:up.test"));
}

TEST_F(TlsClientFixture, AnIpAddressIsMatchedNotSentAsAName) {
  start_server();
  // The certificate names up.test only: 127.0.0.1 is not in it.
  Outcome outcome;
  connect(context("127.0.0.1"), &outcome, port_);
  ASSERT_TRUE(failed(outcome));
  std::lock_guard lock(outcome.mu);
  EXPECT_NE(outcome.why.find("IP address mismatch"), std::string::npos) << outcome.why;
}

TEST_F(TlsClientFixture, TheNextConnectionResumesTheSessionTheServerGave) {
  start_server();
  auto shared = context("up.test");
  Outcome first;
  connect(shared, &first, port_);
  ASSERT_TRUE(got(first, "sni:up.test"));
  // TLS 1.3 tickets come after the handshake, with or before the answer.
  Outcome second;
  connect(shared, &second, port_);
  ASSERT_TRUE(got(second, "sni:up.test"));
  std::lock_guard lock(second.mu);
  EXPECT_TRUE(second.resumed);
  EXPECT_EQ(shared->stats().handshakes, 2u);
  EXPECT_EQ(shared->stats().resumed, 1u);
}

TEST_F(TlsClientFixture, AServerThatNeverAnswersTheHelloTimesOut) {
  // A listening socket nobody serves: the connect succeeds (the backlog),
  // the handshake never ends.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(listener, 8), 0);
  socklen_t length = sizeof address;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  ClientSettings settings;
  settings.name = "up.test";
  settings.ca = cert_.cert;
  settings.handshake_timeout = 300ms;
  Outcome outcome;
  const auto began = std::chrono::steady_clock::now();
  connect(std::make_shared<ClientContext>(settings), &outcome, ntohs(address.sin_port));
  ASSERT_TRUE(failed(outcome));
  EXPECT_GE(std::chrono::steady_clock::now() - began, 250ms);
  {
    std::lock_guard lock(outcome.mu);
    EXPECT_EQ(outcome.error.code, ETIMEDOUT);
    EXPECT_EQ(outcome.why, "TLS handshake: not over in time");
    EXPECT_EQ(outcome.connected, 0);
  }
  ::close(listener);
}

TEST(ClientContext, ACaFileThatIsNotOneIsRefusedByName) {
  tern::testing::TempDir dir;
  const std::string path = dir.path() + "/ca.pem";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("not a certificate\n", f);
  std::fclose(f);
  ClientSettings settings;
  settings.ca = path;
  try {
    ClientContext context(settings);
    FAIL() << "loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tern::tls
