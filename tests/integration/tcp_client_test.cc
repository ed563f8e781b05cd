#include "net/tcp_client.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "net/buffer.h"
#include "net/tcp_connection.h"
#include "net/tcp_server.h"
#include "support/eventually.h"
#include "support/loop_runner.h"
#include "support/temp_dir.h"

namespace tern::net {
namespace {

using namespace std::chrono_literals;
using tern::testing::LoopRunner;
using Clock = std::chrono::steady_clock;

using tern::testing::eventually;

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
      : ClientProbe(loop_runner, SocketAddress(InetAddress(port, true)), std::move(options)) {}
  ClientProbe(LoopRunner& loop_runner, const SocketAddress& server, TcpClientOptions options)
      : runner(loop_runner) {
    runner.run([&] {
      client = std::make_unique<TcpClient>(runner.loop(), server, options);
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
      client->set_connect_failed_callback([this](const Error& error, bool will_retry) {
        std::lock_guard lock(mu);
        failures.push_back({Clock::now(), will_retry, error.code});
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
    int error_code;
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

TEST(TcpClient, APreambleTheSocketDoesNotTakeIsAFailedConnectRetriedUpToTheLimit) {
  // Connected, but the preamble (a PROXY header, meant to be a few bytes)
  // does not fit the fresh socket: a failed connect, retried as any other.
  LoopRunner server_runner;
  LoopRunner client_runner;
  auto server = start_echo_server(server_runner, 0);
  TcpClientOptions options;
  options.preamble.assign(64 << 20, 'p');
  options.connector.initial_backoff = 10ms;
  options.connector.max_attempts = 3;
  ClientProbe probe(client_runner, server->listen_address().port(), options);
  probe.connect();
  ASSERT_TRUE(eventually([&] { return probe.failure_count() == 3; }));
  std::this_thread::sleep_for(200ms);
  std::lock_guard lock(probe.mu);
  ASSERT_EQ(probe.failures.size(), 3u) << "kept trying past max_attempts";
  EXPECT_TRUE(probe.failures[0].will_retry);
  EXPECT_TRUE(probe.failures[1].will_retry);
  EXPECT_FALSE(probe.failures[2].will_retry);
  EXPECT_EQ(probe.failures[0].error_code, EAGAIN);
  EXPECT_EQ(probe.connects.load(), 0);
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

TEST(TcpClient, StopEndsReconnectingAndLeavesTheConnectionOpen) {
  LoopRunner server_runner;
  LoopRunner client_runner;
  auto server = start_echo_server(server_runner, 0);
  TcpClientOptions options;
  options.reconnect = true;
  options.connector.initial_backoff = 10ms;
  ClientProbe probe(client_runner, server->listen_address().port(), options);
  probe.connect();
  ASSERT_TRUE(eventually([&] { return probe.connects.load() == 1; }));
  client_runner.run([&] { probe.client->stop(); });
  ASSERT_TRUE(probe.send("still open"));
  ASSERT_TRUE(eventually([&] { return probe.received_so_far() == "still open"; }));
  // It closes: no connection follows it.
  client_runner.run([&] { probe.client->connection()->force_close(); });
  ASSERT_TRUE(eventually([&] { return probe.disconnects.load() == 1; }));
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(probe.connects.load(), 1);
  // connect() starts again.
  probe.connect();
  EXPECT_TRUE(eventually([&] { return probe.connects.load() == 2; }));
}

// A blocking Unix-domain listener made of plain system calls (there is no
// unix-socket TcpServer): a helper thread accepts one connection and runs
// `session` on its descriptor.
class UnixListener {
 public:
  explicit UnixListener(const SocketAddress& address) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ok_ = fd_ >= 0 && ::bind(fd_, address.sockaddr_ptr(), address.socklen()) == 0 &&
          ::listen(fd_, 4) == 0;
  }
  ~UnixListener() {
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  UnixListener(const UnixListener&) = delete;
  UnixListener& operator=(const UnixListener&) = delete;

  bool ok() const { return ok_; }
  void serve_one(std::function<void(int fd)> session) {
    thread_ = std::thread([this, session = std::move(session)] {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 5000) != 1) return;  // bounded: a broken client fails the test, not hangs it
      int conn = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) return;
      session(conn);
      ::close(conn);
    });
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
  std::thread thread_;
};

// Blocking reads on `fd` until `len` bytes, EOF or 5 s of silence.
std::string read_blocking(int fd, size_t len) {
  std::string out;
  while (out.size() < len) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) break;
    char buf[65536];
    ssize_t n = ::recv(fd, buf, std::min(sizeof buf, len - out.size()), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed;
  for (char& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

TEST(TcpClient, ExchangesBytesBothWaysOverAUnixSocket) {
  tern::testing::TempDir dir;
  ASSERT_TRUE(dir.ok());
  auto address = SocketAddress::unix_path(dir.at("upstream.sock"));
  ASSERT_TRUE(address.ok());
  UnixListener listener(*address);
  ASSERT_TRUE(listener.ok());

  // Large enough that neither side can write it in one go.
  const std::string request = pattern(512 * 1024, 1);
  const std::string reply = pattern(768 * 1024, 2);
  std::string server_got;
  bool server_saw_eof = false;
  listener.serve_one([&](int fd) {
    server_got = read_blocking(fd, request.size());
    std::string_view left = reply;
    while (!left.empty()) {
      ssize_t n = ::send(fd, left.data(), left.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      left.remove_prefix(static_cast<size_t>(n));
    }
    char c;
    pollfd p{fd, POLLIN, 0};
    server_saw_eof = ::poll(&p, 1, 5000) == 1 && ::recv(fd, &c, 1, 0) == 0;
  });

  LoopRunner client_runner;
  TcpClientOptions options;
  options.connector.retry = false;
  ClientProbe probe(client_runner, *address, options);
  probe.connect();
  ASSERT_TRUE(eventually([&] { return probe.connects.load() == 1; }));
  EXPECT_EQ(probe.failure_count(), 0u);
  client_runner.run([&] {
    EXPECT_EQ(probe.client->server(), *address);
    EXPECT_EQ(probe.client->connect_count(), 1);
    TcpConnection* conn = probe.client->connection();
    ASSERT_NE(conn, nullptr);
    // A Unix-domain peer has no IP address.
    EXPECT_EQ(conn->peer_address(), InetAddress());
  });
  ASSERT_TRUE(probe.send(request));
  ASSERT_TRUE(eventually([&] { return probe.received_so_far().size() >= reply.size(); }));
  EXPECT_TRUE(probe.received_so_far() == reply) << "reply corrupted or reordered";

  client_runner.run([&] { probe.client->disconnect(); });
  listener.join();
  EXPECT_EQ(server_got.size(), request.size());
  EXPECT_TRUE(server_got == request) << "request corrupted or reordered";
  EXPECT_TRUE(server_saw_eof) << "disconnect() did not half-close the unix socket";
  EXPECT_TRUE(eventually([&] { return probe.disconnects.load() == 1; }));
}

TEST(TcpClient, ConnectToAMissingUnixPathFailsWithoutRetry) {
  tern::testing::TempDir dir;
  ASSERT_TRUE(dir.ok());
  auto address = SocketAddress::unix_path(dir.at("missing.sock"));
  ASSERT_TRUE(address.ok());

  LoopRunner client_runner;
  TcpClientOptions options;
  options.connector.retry = false;
  ClientProbe probe(client_runner, *address, options);
  probe.connect();
  ASSERT_TRUE(eventually([&] { return probe.failure_count() == 1; }));
  std::this_thread::sleep_for(100ms);
  std::lock_guard lock(probe.mu);
  ASSERT_EQ(probe.failures.size(), 1u);
  EXPECT_FALSE(probe.failures[0].will_retry);
  EXPECT_EQ(probe.failures[0].error_code, ENOENT);
  EXPECT_EQ(probe.connects.load(), 0);
  EXPECT_FALSE(client_runner.run([&] { return probe.client->connection() != nullptr; }));
}

TEST(TcpClient, UnixSocketNobodyListensOnIsRefusedAndRetriedUpToTheLimit) {
  tern::testing::TempDir dir;
  ASSERT_TRUE(dir.ok());
  auto address = SocketAddress::unix_path(dir.at("stale.sock"));
  ASSERT_TRUE(address.ok());
  {
    // Bound and closed: the socket file stays, with no listener behind it.
    UnixListener gone(*address);
    ASSERT_TRUE(gone.ok());
  }

  LoopRunner client_runner;
  TcpClientOptions options;
  options.connector.initial_backoff = 5ms;
  options.connector.max_attempts = 3;
  ClientProbe probe(client_runner, *address, options);
  probe.connect();
  ASSERT_TRUE(eventually([&] { return probe.failure_count() == 3; }));
  std::this_thread::sleep_for(100ms);
  std::lock_guard lock(probe.mu);
  ASSERT_EQ(probe.failures.size(), 3u) << "kept trying past max_attempts";
  for (const auto& f : probe.failures) EXPECT_EQ(f.error_code, ECONNREFUSED);
  EXPECT_TRUE(probe.failures[0].will_retry);
  EXPECT_TRUE(probe.failures[1].will_retry);
  EXPECT_FALSE(probe.failures[2].will_retry);
  EXPECT_EQ(probe.connects.load(), 0);
}

}  // namespace
}  // namespace tern::net
