#include "net/tcp_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/buffer.h"
#include "net/tcp_connection.h"
#include "net/tcp_server.h"
#include "support/loop_runner.h"

namespace tern::net {
namespace {

using namespace std::chrono_literals;
using tern::testing::LoopRunner;
using Clock = std::chrono::steady_clock;

// Polls `ready` for up to `timeout`.
template <typename F>
bool eventually(F ready, std::chrono::milliseconds timeout = 10s) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (ready()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return ready();
}

tern::testing::LoopOwned<TcpServer> start_echo_server(LoopRunner& runner, uint16_t port) {
  auto server = tern::testing::make_on_loop<TcpServer>(runner, runner.loop(), InetAddress(port, true));
  runner.run([&] {
    server->set_message_callback([](TcpConnection& conn, Buffer& input) { conn.send(input); });
    auto started = server->start();
    EXPECT_TRUE(started.ok()) << started.error().message();
  });
  return server;
}

// The client side: a TcpClient on its own loop recording what happens.
struct ClientProbe {
  ClientProbe(LoopRunner& loop_runner, uint16_t port, TcpClientOptions options)
      : runner(loop_runner) {
    runner.run([&] {
      client = std::make_unique<TcpClient>(runner.loop(), InetAddress(port, true), options);
      client->set_connection_callback([this](TcpConnection& conn) {
        if (conn.connected()) {
          ++connects;
        } else {
          ++disconnects;
        }
      });
      client->set_message_callback([this](TcpConnection&, Buffer& input) {
        std::lock_guard lock(mu);
        received += input.retrieve_all_as_string();
      });
      client->set_connect_failed_callback([this](const Error&, bool will_retry) {
        std::lock_guard lock(mu);
        failures.push_back({Clock::now(), will_retry});
      });
    });
  }
  ~ClientProbe() {
    runner.run([&] { client.reset(); });
  }
  ClientProbe(const ClientProbe&) = delete;
  ClientProbe& operator=(const ClientProbe&) = delete;
  void connect() {
    runner.run([&] { client->connect(); });
  }
  bool send(const std::string& data) {
    return runner.run([&] {
      TcpConnection* conn = client->connection();
      if (conn) conn->send(data);
      return conn != nullptr;
    });
  }
  std::string received_so_far() {
    std::lock_guard lock(mu);
    return received;
  }
  std::string take_received() {
    std::lock_guard lock(mu);
    return std::exchange(received, "");
  }
  size_t failure_count() {
    std::lock_guard lock(mu);
    return failures.size();
  }

  struct Failure {
    Clock::time_point at;
    bool will_retry;
  };
  LoopRunner& runner;
  std::unique_ptr<TcpClient> client;
  std::atomic<int> connects{0};
  std::atomic<int> disconnects{0};
  std::mutex mu;
  std::string received;
  std::vector<Failure> failures;
};

TEST(TcpClient, ReconnectsWhenTheServerGoesAwayAndComesBack) {
  LoopRunner server_runner;
  LoopRunner client_runner;
  auto server = start_echo_server(server_runner, 0);
  const uint16_t port = server->listen_address().port();

  TcpClientOptions options;
  options.reconnect = true;
  options.connector.initial_backoff = 20ms;
  options.connector.max_backoff = 100ms;
  ClientProbe probe(client_runner, port, options);
  probe.connect();
  ASSERT_TRUE(eventually([&] { return probe.connects.load() == 1; }));
  ASSERT_TRUE(probe.send("ping"));
  ASSERT_TRUE(eventually([&] { return probe.received_so_far() == "ping"; }));
  probe.take_received();

  server.reset();
  ASSERT_TRUE(eventually([&] { return probe.disconnects.load() == 1; }));
  // Nothing listens now: attempts fail and are retried.
  ASSERT_TRUE(eventually([&] { return probe.failure_count() >= 3; }));

  server = start_echo_server(server_runner, port);
  ASSERT_TRUE(eventually([&] { return probe.connects.load() == 2; }));
  ASSERT_TRUE(probe.send("pong"));
  ASSERT_TRUE(eventually([&] { return probe.received_so_far() == "pong"; }));
  EXPECT_EQ(client_runner.run([&] { return probe.client->connect_count(); }), 2);
  server.reset();
}

TEST(TcpClient, WithoutRetryAFailedConnectIsReportedOnce) {
  LoopRunner server_runner;
  LoopRunner client_runner;
  auto server = start_echo_server(server_runner, 0);
  const uint16_t port = server->listen_address().port();
  server.reset();  // the port is now closed

  TcpClientOptions options;
  options.connector.retry = false;
  ClientProbe probe(client_runner, port, options);
  probe.connect();
  ASSERT_TRUE(eventually([&] { return probe.failure_count() == 1; }));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(probe.failure_count(), 1u);
  EXPECT_FALSE(probe.failures[0].will_retry);
  EXPECT_EQ(probe.connects.load(), 0);
}

TEST(TcpClient, RetryDelaysGrowExponentiallyUpToTheMaximum) {
  LoopRunner server_runner;
  LoopRunner client_runner;
  auto server = start_echo_server(server_runner, 0);
  const uint16_t port = server->listen_address().port();
  server.reset();

  TcpClientOptions options;
  options.connector.initial_backoff = 20ms;
  options.connector.max_backoff = 80ms;
  options.connector.max_attempts = 6;
  ClientProbe probe(client_runner, port, options);
  probe.connect();
  ASSERT_TRUE(eventually([&] { return probe.failure_count() == 6; }));
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(probe.failure_count(), 6u) << "kept trying past max_attempts";
  EXPECT_FALSE(probe.failures.back().will_retry);
  // Nominal delays 20, 40, 80, 80, 80 ms; with equal jitter each is at least half.
  const int nominal[] = {20, 40, 80, 80, 80};
  for (size_t i = 1; i < probe.failures.size(); ++i) {
    auto gap = std::chrono::duration_cast<std::chrono::milliseconds>(probe.failures[i].at -
                                                                     probe.failures[i - 1].at);
    EXPECT_GE(gap.count(), nominal[i - 1] / 2 - 1) << "retry " << i;
    EXPECT_TRUE(probe.failures[i - 1].will_retry);
  }
}

TEST(TcpClient, DisconnectClosesAndDoesNotReconnect) {
  LoopRunner server_runner;
  LoopRunner client_runner;
  auto server = start_echo_server(server_runner, 0);
  TcpClientOptions options;
  options.reconnect = true;
  options.connector.initial_backoff = 10ms;
  ClientProbe probe(client_runner, server->listen_address().port(), options);
  probe.connect();
  ASSERT_TRUE(eventually([&] { return probe.connects.load() == 1; }));
  client_runner.run([&] { probe.client->disconnect(); });
  ASSERT_TRUE(eventually([&] { return probe.disconnects.load() == 1; }));
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(probe.connects.load(), 1);
  server.reset();
}

}  // namespace
}  // namespace tern::net
