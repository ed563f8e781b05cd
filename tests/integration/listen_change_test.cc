// TcpServer::set_listen_addresses: a reload opens new listening addresses
// and closes removed ones while established connections carry on, in both
// accept modes; an address that cannot be bound changes nothing.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "net/buffer.h"
#include "net/inet_address.h"
#include "net/tcp_connection.h"
#include "net/tcp_server.h"
#include "support/free_port.h"
#include "support/loop_runner.h"
#include "support/raw_socket.h"

namespace tern::net {
namespace {

using namespace std::chrono_literals;
using tern::testing::RawClient;
using tern::testing::free_port;

InetAddress loopback(uint16_t port) { return InetAddress::from_ip_port("127.0.0.1", port).value(); }

bool echoes(RawClient& client, std::string_view text) {
  return client.send_all(text) && client.read_exactly(text.size(), 5s) == text;
}

bool refused(uint16_t port) {
  RawClient client(port);
  return !client.ok();
}

class ListenChangeTest : public ::testing::TestWithParam<AcceptMode> {};

TEST_P(ListenChangeTest, AddressesComeAndGoWhileConnectionsCarryOn) {
  tern::testing::LoopRunner runner;
  TcpServerOptions options;
  options.name = "echo";
  options.io_threads = 2;
  options.accept_mode = GetParam();
  const uint16_t a = free_port(), b = free_port();
  auto server = tern::testing::make_on_loop<TcpServer>(runner, runner.loop(), loopback(a), options);
  runner.run([&] {
    server->set_message_callback([](TcpConnection& conn, Buffer& input) { conn.send(input); });
    ASSERT_TRUE(server->start().ok());
  });
  RawClient kept(a);
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE(echoes(kept, "first"));

  // A second address.
  ASSERT_TRUE(runner.run([&] { return server->set_listen_addresses({loopback(a), loopback(b)}).ok(); }));
  std::this_thread::sleep_for(50ms);  // reuseport: each loop picks its socket up
  RawClient on_b(b);
  ASSERT_TRUE(on_b.ok());
  EXPECT_TRUE(echoes(on_b, "second"));

  // The first one goes; its connection stays.
  ASSERT_TRUE(runner.run([&] { return server->set_listen_addresses({loopback(b)}).ok(); }));
  std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(refused(a));
  EXPECT_TRUE(echoes(kept, "still here"));
  EXPECT_EQ(runner.run([&] { return server->listen_addresses().size(); }), 1u);

  // An address someone else holds: an error, and nothing changes.
  tern::testing::RawListener blocker(/*backlog=*/4);
  ASSERT_GE(blocker.fd(), 0);
  const uint16_t taken = blocker.port();
  const uint16_t c = free_port();
  EXPECT_FALSE(runner.run([&] {
    return server->set_listen_addresses({loopback(c), loopback(taken)}).ok();
  }));
  EXPECT_TRUE(refused(c));  // bound and dropped again, never listened on
  RawClient again(b);
  EXPECT_TRUE(echoes(again, "unchanged"));
}

INSTANTIATE_TEST_SUITE_P(Modes, ListenChangeTest,
                         ::testing::Values(AcceptMode::kDispatch, AcceptMode::kReusePort),
                         [](const auto& param_info) {
                           return param_info.param == AcceptMode::kDispatch ? "Dispatch" : "ReusePort";
                         });

}  // namespace
}  // namespace tern::net
