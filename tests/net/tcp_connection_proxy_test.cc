// A listener that expects the PROXY protocol (TcpServer::set_proxy_protocol):
// the header is read before the connection is announced, whole or in
// pieces, in the first read of a deferred accept or later, with both
// triggers; its client becomes client_address(); a peer not trusted, a
// malformed header, a header that never comes and a client the accept
// filter or the gate refuses all close the connection, unannounced (its
// close too); the gate counts the header's client, in and out.
#include <poll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "net/proxy_protocol.h"
#include "net/tcp_connection.h"
#include "net/tcp_server.h"
#include "support/eventually.h"
#include "support/loop_runner.h"
#include "support/raw_socket.h"

namespace tern::net {
namespace {

using namespace std::chrono_literals;
using tern::testing::eventually;
using tern::testing::LoopRunner;
using tern::testing::RawClient;

const std::string kHeaderV1 = "PROXY TCP4 203.0.113.7 10.0.0.2 51234 443\r\n";

// Whether the server closed `client` (an end or a reset) within `timeout`,
// having sent nothing.
bool closed_silently(RawClient& client, std::chrono::milliseconds timeout = 5s) {
  pollfd p{client.fd(), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
  char byte = 0;
  return ::recv(client.fd(), &byte, 1, 0) <= 0;
}

struct Params {
  TriggerMode trigger;
  bool defer_accept;
};

class ProxyListenerTest : public ::testing::TestWithParam<Params> {
 protected:
  // An echo server on loopback whose address expects the header from peers
  // `trusted` accepts; each announced connection's client is recorded.
  void start(std::function<bool(const InetAddress&)> trusted = [](const InetAddress&) { return true; },
             std::chrono::milliseconds timeout = 10s,
             std::function<bool(const InetAddress&)> filter = nullptr) {
    TcpServerOptions options;
    options.trigger = GetParam().trigger;
    if (GetParam().defer_accept) options.defer_accept = 1s;
    runner_.run([&] {
      const InetAddress address(0, true);
      server_ = std::make_unique<TcpServer>(runner_.loop(), address, options);
      server_->set_proxy_protocol(address, {.trusted = std::move(trusted), .timeout = timeout});
      if (filter) server_->set_accept_filter(std::move(filter));
      server_->set_connection_callback([this](TcpConnection& conn) {
        std::lock_guard lock(mu_);
        if (!conn.connected()) {
          closes_.push_back(conn.client_address().to_ip_port());
          return;
        }
        clients_.push_back(conn.client_address().to_ip_port());
        peers_.push_back(conn.peer_address().to_ip());
        ASSERT_NE(conn.proxy_header(), nullptr);
      });
      server_->set_message_callback([](TcpConnection& conn, Buffer& input) { conn.send(input); });
      auto started = server_->start();
      ASSERT_TRUE(started.ok()) << started.error().message();
    });
    port_ = server_->listen_address().port();
  }
  void TearDown() override {
    runner_.run([&] { server_.reset(); });
  }
  std::vector<std::string> clients() {
    std::lock_guard lock(mu_);
    return clients_;
  }

  LoopRunner runner_;
  std::unique_ptr<TcpServer> server_;
  uint16_t port_ = 0;
  std::mutex mu_;
  std::vector<std::string> clients_;
  std::vector<std::string> peers_;
  std::vector<std::string> closes_;  // announced closes
};

// Lets each client address hold one connection; records who left.
class OnePerClient final : public ConnectionGate {
 public:
  bool enter(const InetAddress& client) override {
    std::lock_guard lock(mu);
    return held.insert(client.to_ip()).second;
  }
  void leave(const InetAddress& client) override {
    std::lock_guard lock(mu);
    held.erase(client.to_ip());
    left.push_back(client.to_ip());
  }
  std::mutex mu;
  std::set<std::string> held;
  std::vector<std::string> left;
};

TEST_P(ProxyListenerTest, TheHeadersClientIsTheConnectionsAndWhatFollowsIsItsFirstBytes) {
  start();
  RawClient client(port_);
  ASSERT_TRUE(client.send_all(kHeaderV1 + "hello\n"));
  EXPECT_EQ(client.read_exactly(6), "hello\n");
  ASSERT_EQ(clients(), std::vector<std::string>{"203.0.113.7:51234"});
  std::lock_guard lock(mu_);
  EXPECT_EQ(peers_, std::vector<std::string>{"127.0.0.1"});
}

TEST_P(ProxyListenerTest, AHeaderInPiecesIsAnnouncedOnlyOnceWhole) {
  start();
  const std::string header = proxy_header_v2(*InetAddress::parse("[2001:db8::7]:80"),
                                             *InetAddress::parse("[2001:db8::1]:443"));
  RawClient client(port_);
  for (size_t i = 0; i + 1 < header.size(); ++i) {
    ASSERT_TRUE(client.send_all(header.substr(i, 1)));
    if (i % 8 == 0) std::this_thread::sleep_for(2ms);  // separate reads
  }
  std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(clients().empty());
  ASSERT_TRUE(client.send_all(header.substr(header.size() - 1) + "x"));
  EXPECT_EQ(client.read_exactly(1), "x");
  EXPECT_EQ(clients(), std::vector<std::string>{"[2001:db8::7]:80"});
}

TEST_P(ProxyListenerTest, ALocalHeaderLeavesThePeerTheClient) {
  start();
  RawClient client(port_);
  // A LOCAL header (version 2), then two bytes.
  ASSERT_TRUE(client.send_all(std::string_view("\r\n\r\n\0\r\nQUIT\n\x20\x00\x00\x00hi", 18)));
  EXPECT_EQ(client.read_exactly(2), "hi");
  ASSERT_EQ(clients().size(), 1u);
  EXPECT_TRUE(clients()[0].starts_with("127.0.0.1:")) << clients()[0];
}

TEST_P(ProxyListenerTest, APeerNotTrustedIsClosedAtAccept) {
  start([](const InetAddress&) { return false; });
  RawClient client(port_);
  ASSERT_TRUE(client.send_all(kHeaderV1 + "hello\n"));
  EXPECT_TRUE(closed_silently(client));
  EXPECT_TRUE(clients().empty());
}

TEST_P(ProxyListenerTest, AMalformedHeaderClosesTheConnectionUnannounced) {
  start();
  for (const std::string& bytes : {std::string("GET / HTTP/1.1\r\n\r\n"), std::string("PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n"),
                                  "PROXY UNKNOWN " + std::string(200, 'x')}) {
    RawClient client(port_);
    ASSERT_TRUE(client.send_all(bytes));
    EXPECT_TRUE(closed_silently(client)) << bytes;
  }
  EXPECT_TRUE(clients().empty());
}

TEST_P(ProxyListenerTest, AHeaderThatNeverComesClosesTheConnectionInTime) {
  start([](const InetAddress&) { return true; }, 200ms);
  RawClient client(port_);
  ASSERT_TRUE(client.send_all("PROXY TCP4 "));
  const auto began = std::chrono::steady_clock::now();
  EXPECT_TRUE(closed_silently(client, 5s));
  EXPECT_LT(std::chrono::steady_clock::now() - began, 3s);
  EXPECT_TRUE(clients().empty());
}

TEST_P(ProxyListenerTest, TheAcceptFilterJudgesTheClientTheHeaderNames) {
  start([](const InetAddress&) { return true; }, 10s,
        [](const InetAddress& address) { return address.to_ip() != "203.0.113.7"; });
  {
    RawClient client(port_);
    ASSERT_TRUE(client.send_all(kHeaderV1 + "hello\n"));
    EXPECT_TRUE(closed_silently(client));
  }
  {
    RawClient client(port_);
    ASSERT_TRUE(client.send_all("PROXY TCP4 203.0.113.8 10.0.0.2 51234 443\r\nhello\n"));
    EXPECT_EQ(client.read_exactly(6), "hello\n");
    EXPECT_EQ(clients(), std::vector<std::string>{"203.0.113.8:51234"});
  }
  // Only the connection announced has its close announced (a refused one's
  // reached an owner that never had it).
  EXPECT_TRUE(eventually([&] {
    std::lock_guard lock(mu_);
    return closes_.size() == 1;
  }));
  std::this_thread::sleep_for(50ms);
  std::lock_guard lock(mu_);
  EXPECT_EQ(closes_, std::vector<std::string>{"203.0.113.8:51234"});
}

TEST_P(ProxyListenerTest, TheGateCountsTheClientTheHeaderNamesAndItLeavesOnClose) {
  start();
  auto gate = std::make_shared<OnePerClient>();
  server_->set_gate(gate);
  auto first = std::make_unique<RawClient>(port_);
  ASSERT_TRUE(first->send_all(kHeaderV1 + "a"));
  EXPECT_EQ(first->read_exactly(1), "a");
  {
    RawClient second(port_);  // the same client, from the same balancer
    ASSERT_TRUE(second.send_all(kHeaderV1 + "b"));
    EXPECT_TRUE(closed_silently(second));
  }
  RawClient other(port_);
  ASSERT_TRUE(other.send_all("PROXY TCP4 203.0.113.8 10.0.0.2 51234 443\r\nc"));
  EXPECT_EQ(other.read_exactly(1), "c");
  // The first leaves: its client may come again, and the gate was told.
  first.reset();
  EXPECT_TRUE(eventually([&] {
    std::lock_guard lock(gate->mu);
    return gate->left == std::vector<std::string>{"203.0.113.7"};
  }));
  RawClient again(port_);
  ASSERT_TRUE(again.send_all(kHeaderV1 + "d"));
  EXPECT_EQ(again.read_exactly(1), "d");
  // A server given no gate lets everyone in; the connections in keep theirs.
  server_->set_gate(nullptr);
  RawClient free(port_);
  ASSERT_TRUE(free.send_all(kHeaderV1 + "e"));
  EXPECT_EQ(free.read_exactly(1), "e");
}

// Without PROXY protocol the peer is the client, asked at accept.
TEST(ConnectionGateTest, APlainAddressAsksTheGateAtAcceptAndTheCloseLeaves) {
  LoopRunner runner;
  std::unique_ptr<TcpServer> server;
  auto gate = std::make_shared<OnePerClient>();
  std::atomic<int> announced{0};
  runner.run([&] {
    server = std::make_unique<TcpServer>(runner.loop(), InetAddress(0, true));
    server->set_gate(gate);
    server->set_connection_callback([&announced](TcpConnection& conn) {
      if (conn.connected()) announced.fetch_add(1);
    });
    server->set_message_callback([](TcpConnection& conn, Buffer& input) { conn.send(input); });
    ASSERT_TRUE(server->start().ok());
  });
  const uint16_t port = server->listen_address().port();
  {
    RawClient first(port);
    ASSERT_TRUE(first.send_all("a"));
    EXPECT_EQ(first.read_exactly(1), "a");
    RawClient second(port);
    EXPECT_TRUE(closed_silently(second));
    EXPECT_EQ(announced.load(), 1);
  }
  EXPECT_TRUE(eventually([&] {
    std::lock_guard lock(gate->mu);
    return gate->left == std::vector<std::string>{"127.0.0.1"} && gate->held.empty();
  }));
  RawClient again(port);
  ASSERT_TRUE(again.send_all("b"));
  EXPECT_EQ(again.read_exactly(1), "b");
  runner.run([&] { server.reset(); });
}

std::string params_name(const ::testing::TestParamInfo<Params>& info) {
  return std::string(info.param.trigger == TriggerMode::kEdge ? "Edge" : "Level") +
         (info.param.defer_accept ? "Deferred" : "");
}

INSTANTIATE_TEST_SUITE_P(Reads, ProxyListenerTest,
                         ::testing::Values(Params{TriggerMode::kLevel, false}, Params{TriggerMode::kEdge, false},
                                           Params{TriggerMode::kLevel, true}, Params{TriggerMode::kEdge, true}),
                         params_name);

}  // namespace
}  // namespace tern::net
