// 1,000 concurrent clients against an echo server with 4 I/O loops, each
// client sending one message of random size (1 B to 1 MiB, log-uniform, so
// every order of magnitude is represented) and checking every byte that
// comes back. Runs in every accept mode, dispatch policy and trigger mode.
//
// The clients are plain epoll code in the test thread, sharing nothing with
// the library under test.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "net/buffer.h"
#include "net/tcp_connection.h"
#include "net/tcp_server.h"
#include "support/loop_runner.h"

namespace tern::net {
namespace {

using namespace std::chrono_literals;

constexpr int kClients = 1000;
constexpr size_t kMaxMessage = 1024 * 1024;

struct Client {
  int fd = -1;
  std::string payload;
  size_t sent = 0;
  size_t received = 0;
  bool done = false;
};

void raise_fd_limit(rlim_t wanted) {
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_cur < wanted) {
    limit.rlim_cur = std::min(wanted, limit.rlim_max);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &limit), 0);
  }
  ASSERT_GE(limit.rlim_cur, wanted) << "need " << wanted << " file descriptors";
}

std::vector<Client> make_clients(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> log_size(0.0, std::log(static_cast<double>(kMaxMessage)));
  std::vector<Client> clients(kClients);
  for (int i = 0; i < kClients; ++i) {
    size_t size = static_cast<size_t>(std::exp(log_size(rng)));
    if (i == 0) size = 1;
    if (i == 1) size = kMaxMessage;
    size = std::clamp<size_t>(size, 1, kMaxMessage);
    clients[i].payload.resize(size);
    for (char& c : clients[i].payload) c = static_cast<char>(rng());
  }
  return clients;
}

// Connects every client (blocking connect on loopback: the kernel completes
// the handshake from the listen backlog), then makes them non-blocking.
void connect_all(std::vector<Client>& clients, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (Client& c : clients) {
    c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(c.fd, 0) << std::strerror(errno);
    ASSERT_EQ(::connect(c.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
        << std::strerror(errno);
    ::fcntl(c.fd, F_SETFL, ::fcntl(c.fd, F_GETFL) | O_NONBLOCK);
  }
}

// Drives every client to completion. Returns a description of the first
// problem, or "" when every byte came back intact.
std::string exchange_all(std::vector<Client>& clients, std::chrono::seconds timeout) {
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  for (size_t i = 0; i < clients.size(); ++i) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.u64 = i;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, clients[i].fd, &ev);
  }
  size_t remaining = clients.size();
  std::string problem;
  std::vector<char> buf(256 * 1024);
  std::vector<epoll_event> events(256);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (remaining > 0 && problem.empty()) {
    if (std::chrono::steady_clock::now() > deadline) {
      problem = std::to_string(remaining) + " clients unfinished at the deadline";
      break;
    }
    int n = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), 1000);
    for (int k = 0; k < n && problem.empty(); ++k) {
      size_t i = events[static_cast<size_t>(k)].data.u64;
      Client& c = clients[i];
      if (c.done) continue;
      if ((events[static_cast<size_t>(k)].events & EPOLLOUT) && c.sent < c.payload.size()) {
        ssize_t w = ::send(c.fd, c.payload.data() + c.sent, c.payload.size() - c.sent, MSG_NOSIGNAL);
        if (w > 0) c.sent += static_cast<size_t>(w);
        if (w < 0 && errno != EAGAIN) problem = "client " + std::to_string(i) + " send: " + std::strerror(errno);
        if (c.sent == c.payload.size()) {
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.u64 = i;
          ::epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
        }
      }
      if (events[static_cast<size_t>(k)].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        ssize_t r = ::recv(c.fd, buf.data(), buf.size(), 0);
        if (r == 0 || (r < 0 && errno != EAGAIN)) {
          problem = "client " + std::to_string(i) + " lost its connection after " +
                    std::to_string(c.received) + " of " + std::to_string(c.payload.size()) + " bytes";
        } else if (r > 0) {
          if (c.received + static_cast<size_t>(r) > c.payload.size() ||
              std::memcmp(buf.data(), c.payload.data() + c.received, static_cast<size_t>(r)) != 0) {
            problem = "client " + std::to_string(i) + " got wrong bytes at offset " +
                      std::to_string(c.received);
          }
          c.received += static_cast<size_t>(r);
          if (c.received == c.payload.size()) {
            c.done = true;
            --remaining;
            ::epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
          }
        }
      }
    }
  }
  ::close(ep);
  return problem;
}

using Params = std::tuple<AcceptMode, DispatchPolicy, TriggerMode>;

class EchoStressTest : public ::testing::TestWithParam<Params> {};

TEST_P(EchoStressTest, ThousandConcurrentClientsGetEveryByteBack) {
  raise_fd_limit(3 * kClients + 100);
  auto [mode, policy, trigger] = GetParam();

  tern::testing::LoopRunner runner;
  std::atomic<int> live{0};
  std::atomic<int> peak{0};
  std::atomic<uint64_t> loops_used_mask{0};
  TcpServerOptions options;
  options.name = "echo";
  options.io_threads = 4;
  options.accept_mode = mode;
  options.dispatch_policy = policy;
  options.trigger = trigger;
  auto server = tern::testing::make_on_loop<TcpServer>(runner, runner.loop(), InetAddress(0, true), options);
  runner.run([&] {
    server->set_connection_callback([&](TcpConnection& conn) {
      if (conn.connected()) {
        int now = live.fetch_add(1) + 1;
        int seen = peak.load();
        while (now > seen && !peak.compare_exchange_weak(seen, now)) {
        }
        const auto& loops = server->io_loops();
        for (size_t i = 0; i < loops.size(); ++i) {
          if (loops[i] == conn.loop()) loops_used_mask.fetch_or(uint64_t{1} << i);
        }
      } else {
        live.fetch_sub(1);
      }
    });
    server->set_message_callback([](TcpConnection& conn, Buffer& input) { conn.send(input); });
    ASSERT_TRUE(server->start().ok());
  });
  const uint16_t port = server->listen_address().port();

  std::vector<Client> clients = make_clients(42);
  connect_all(clients, port);
  // Every client is connected before any sends: the server holds all 1,000 at once.
  for (int i = 0; i < 500 && peak.load() < kClients; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(peak.load(), kClients);

  std::string problem = exchange_all(clients, std::chrono::seconds(240));
  EXPECT_EQ(problem, "");
  size_t bytes = 0;
  for (Client& c : clients) {
    bytes += c.received;
    ::close(c.fd);
  }
  size_t expected = 0;
  for (Client& c : clients) expected += c.payload.size();
  EXPECT_EQ(bytes, expected);
  // Each of the 4 loops served some of the clients.
  EXPECT_EQ(loops_used_mask.load(), 0xFu);

  for (int i = 0; i < 500 && live.load() > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(live.load(), 0) << "server did not see every close";
}

std::string param_name(const ::testing::TestParamInfo<Params>& info) {
  auto [mode, policy, trigger] = info.param;
  std::string name = mode == AcceptMode::kDispatch ? "Dispatch" : "ReusePort";
  if (mode == AcceptMode::kDispatch) {
    name += policy == DispatchPolicy::kRoundRobin ? "RoundRobin" : "LeastLoaded";
  }
  name += trigger == TriggerMode::kLevel ? "Level" : "Edge";
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    Modes, EchoStressTest,
    ::testing::Values(
        Params{AcceptMode::kDispatch, DispatchPolicy::kRoundRobin, TriggerMode::kLevel},
        Params{AcceptMode::kDispatch, DispatchPolicy::kRoundRobin, TriggerMode::kEdge},
        Params{AcceptMode::kDispatch, DispatchPolicy::kLeastLoaded, TriggerMode::kLevel},
        Params{AcceptMode::kDispatch, DispatchPolicy::kLeastLoaded, TriggerMode::kEdge},
        Params{AcceptMode::kReusePort, DispatchPolicy::kRoundRobin, TriggerMode::kLevel},
        Params{AcceptMode::kReusePort, DispatchPolicy::kRoundRobin, TriggerMode::kEdge}),
    param_name);

}  // namespace
}  // namespace tern::net
