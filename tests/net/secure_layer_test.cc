// TcpConnection with a SecureLayer: when a connection's layer gives back
// the memory it keeps for records (SecureLayer::release_buffers). A layer
// that passes bytes through unchanged counts the calls, so the policy is
// tested apart from OpenSSL: a quiet connection gives them back as soon as
// its response is written; one whose requests come back to back keeps them
// until it has been quiet a while.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "net/secure_layer.h"
#include "net/tcp_connection.h"
#include "net/tcp_server.h"
#include "support/loop_runner.h"
#include "support/raw_socket.h"

namespace tern::net {
namespace {

using namespace std::chrono_literals;
using tern::testing::LoopRunner;
using tern::testing::RawClient;

// Established from the start; what it sends and receives is the plaintext.
class PassThrough final : public SecureLayer {
 public:
  explicit PassThrough(std::atomic<int>* released) : released_(released) {}
  Status receive(Buffer& from_peer, Buffer& plain, Buffer& /*to_send*/) override {
    plain.append(from_peer.peek(), from_peer.readable_bytes());
    from_peer.retrieve_all();
    return Status::kOk;
  }
  Status send(const char* data, size_t n, Buffer& to_send) override {
    to_send.append(data, n);
    return Status::kOk;
  }
  void close(Buffer& /*to_send*/) override {}
  bool established() const override { return true; }
  void release_buffers() override { released_->fetch_add(1); }
  std::string_view protocol() const override { return "pass"; }
  std::string_view cipher() const override { return ""; }
  std::string_view server_name() const override { return ""; }
  std::string_view application_protocol() const override { return ""; }
  bool resumed() const override { return false; }

 private:
  std::atomic<int>* released_;
};

class PassThroughContext final : public SecureContext {
 public:
  std::unique_ptr<SecureLayer> new_layer() override { return std::make_unique<PassThrough>(&released); }
  std::chrono::milliseconds handshake_timeout() const override { return 10s; }
  std::atomic<int> released{0};
};

class SecureLayerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runner_.run([&] {
      server_ = std::make_unique<TcpServer>(runner_.loop(), InetAddress(0, true));
      server_->set_secure_context(InetAddress(0, true), context_);
      server_->set_message_callback([](TcpConnection& conn, Buffer& in) { conn.send(in); });
      auto started = server_->start();
      ASSERT_TRUE(started.ok()) << started.error().message();
    });
    port_ = server_->listen_address().port();
  }
  void TearDown() override {
    runner_.run([&] { server_.reset(); });
  }
  // Waits up to `limit` for the count of releases to reach `n`.
  bool released_reaches(int n, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (context_->released.load() < n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(5ms);
    }
    return true;
  }

  LoopRunner runner_;
  std::shared_ptr<PassThroughContext> context_ = std::make_shared<PassThroughContext>();
  std::unique_ptr<TcpServer> server_;
  uint16_t port_ = 0;
};

TEST_F(SecureLayerTest, AConnectionGivesBackItsLayersBuffersOnceItsResponseIsWritten) {
  RawClient client(port_);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client.send_all("ping"));
  ASSERT_EQ(client.read_exactly(4), "ping");
  // At once, not after the second a connection sending back to back waits.
  EXPECT_TRUE(released_reaches(1, 500ms)) << context_->released.load();
}

TEST_F(SecureLayerTest, AConnectionWhoseRequestsComeBackToBackKeepsThemUntilItIsQuiet) {
  RawClient client(port_);
  ASSERT_TRUE(client.ok());
  constexpr int kRequests = 50;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(client.send_all("ping"));
    ASSERT_EQ(client.read_exactly(4), "ping");
  }
  // Each response written gave them back before; now only the first (it
  // came after no response) and any request a slow machine delayed past
  // the 10 ms that count as back to back.
  const int during = context_->released.load();
  EXPECT_LE(during, kRequests / 5);
  // Quiet for a second: they go back.
  EXPECT_TRUE(released_reaches(during + 1, 3s)) << during;
}

}  // namespace
}  // namespace tern::net
