#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <random>
#include <set>
#include <string>

#include "net/udp_server.h"
#include "net/udp_socket.h"
#include "support/loop_runner.h"

namespace tern::net {
namespace {

using namespace std::chrono_literals;
using tern::testing::LoopRunner;

tern::testing::LoopOwned<UdpServer> start_echo(LoopRunner& runner, UdpServerOptions options) {
  auto server = tern::testing::make_on_loop<UdpServer>(runner, runner.loop(), InetAddress(0, true), options);
  runner.run([&] {
    server->set_datagram_callback([](UdpServer& self, std::string_view data, const InetAddress& peer) {
      self.send_to(peer, data);
    });
    EXPECT_TRUE(server->start().ok());
  });
  return server;
}

UdpSocket client_socket() {
  auto socket = UdpSocket::open(AF_INET);
  EXPECT_TRUE(socket.ok());
  // Blocking, with a receive timeout: a lost reply fails the test, not hangs it.
  ::fcntl(socket->fd(), F_SETFL, ::fcntl(socket->fd(), F_GETFL) & ~O_NONBLOCK);
  timeval tv{2, 0};
  ::setsockopt(socket->fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  int big = 4 * 1024 * 1024;
  ::setsockopt(socket->fd(), SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  return std::move(*socket);
}

TEST(UdpServer, EchoesEveryDatagramIntactInBursts) {
  LoopRunner runner;
  auto server = start_echo(runner, {});
  const InetAddress address = server->local_address();
  UdpSocket client = client_socket();
  std::mt19937 rng(7);
  constexpr int kBursts = 40;
  // A batch of replies leaves in one sendmmsg. Bursts stay well inside the
  // client's default receive buffer (loopback drops what does not fit).
  constexpr int kBurst = 16;
  std::vector<char> buf(70000);
  for (int b = 0; b < kBursts; ++b) {
    std::set<std::string> outstanding;
    for (int i = 0; i < kBurst; ++i) {
      std::string datagram = std::to_string(b * kBurst + i) + ":";
      datagram.resize(std::uniform_int_distribution<size_t>(datagram.size(), 4096)(rng), 'x');
      for (size_t k = datagram.find(':') + 1; k < datagram.size(); ++k) datagram[k] = static_cast<char>(rng());
      ASSERT_TRUE(client.send_to(datagram, address).ok());
      outstanding.insert(datagram);
    }
    for (int i = 0; i < kBurst; ++i) {
      InetAddress from;
      auto n = client.receive_from(buf.data(), buf.size(), &from);
      ASSERT_TRUE(n.ok()) << "burst " << b << ": reply " << i << " missing; server received "
                          << runner.run([&] { return server->received(); }) << " sent "
                          << runner.run([&] { return server->sent(); }) << " dropped "
                          << runner.run([&] { return server->dropped(); });
      EXPECT_EQ(from, address);
      EXPECT_EQ(outstanding.erase(std::string(buf.data(), *n)), 1u) << "unexpected reply";
    }
  }
  runner.run([&] {
    EXPECT_EQ(server->received(), uint64_t{kBursts * kBurst});
    EXPECT_EQ(server->sent(), uint64_t{kBursts * kBurst});
    EXPECT_EQ(server->dropped(), 0u);
  });
}

TEST(UdpServer, OversizedDatagramIsDroppedAndCountedNotTruncated) {
  LoopRunner runner;
  UdpServerOptions options;
  options.max_datagram = 1024;
  auto server = start_echo(runner, options);
  UdpSocket client = client_socket();
  ASSERT_TRUE(client.send_to(std::string(2000, 'x'), server->local_address()).ok());
  ASSERT_TRUE(client.send_to("small", server->local_address()).ok());
  char buf[4096];
  auto n = client.receive_from(buf, sizeof buf, nullptr);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(std::string(buf, *n), "small");
  runner.run([&] {
    EXPECT_EQ(server->dropped(), 1u);
    EXPECT_EQ(server->received(), 1u);
  });
}

}  // namespace
}  // namespace tern::net
