// Steady state allocates nothing: 10,000 keep-alive requests for a small
// static file, after a warm-up, make no heap allocation on the loop thread;
// a request relayed to an upstream makes two (its call with the codec, and
// the response's field table), with one request in flight or hundreds.
// (Its own test binary: it replaces the global operator new.)
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <new>
#include <string>

#include "files/file_response.h"
#include "files/static_files.h"
#include "http/http_server.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"
#include "net/tcp_server.h"
#include "proxy/http_codec.h"
#include "server/handlers/static_handler.h"
#include "server/limits/rate_limit.h"
#include "upstream/group.h"
#include "support/loop_runner.h"
#include "support/raw_socket.h"
#include "support/temp_dir.h"

namespace {
// Counted only on threads that ask for it (the server's loop).
thread_local bool t_counting = false;
std::atomic<size_t> g_allocations{0};
}  // namespace

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t size) {
  if (t_counting) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
// The nothrow forms too: replacing only some would pair a sanitizer's new
// with this delete.
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  if (t_counting) g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace tern::server {
namespace {

using tern::testing::LoopRunner;
using tern::testing::RawClient;

constexpr int kWarmup = 1000;
constexpr int kMeasured = 10000;

class SteadyStateAllocations : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(root_.write("1k.html", std::string(1024, 'x')));
    ASSERT_TRUE(root_.write("100k.bin", std::string(100 * 1024, 'y')));
    server_ = tern::testing::make_on_loop<http::HttpServer>(runner_, runner_.loop(),
                                                            net::InetAddress(0, true));
    runner_.run([&] {
      files::StaticFilesOptions options;
      options.root = root_.path();
      files_ = std::make_unique<files::StaticFiles>(options);
      server_->router().set_fallback([this](const http::Request& r, http::ResponseWriter& w) {
        files::respond_static(*files_, r, w, runner_.loop()->clock().now());
      });
      ASSERT_TRUE(server_->start().ok());
    });
  }
  void TearDown() override {
    server_.reset();
    runner_.run([&] { files_.reset(); });
  }

  // Sends `count` requests one after another on one connection, reading each
  // response whole; false if one goes wrong.
  bool exchange(RawClient& client, int count, std::string_view path = "/1k.html") {
    const std::string request = "GET " + std::string(path) + " HTTP/1.1\r\nHost: x\r\n\r\n";
    for (int i = 0; i < count; ++i) {
      if (!client.send_all(request)) return false;
      std::string head = client.read_exactly(response_size_ == 0 ? 1 : response_size_);
      if (response_size_ == 0) {
        // First response: learn its size (head + 1024-byte body).
        head += client.read_to_eof(nullptr, std::chrono::milliseconds(200));
        if (head.find("200 OK") == std::string::npos) return false;
        response_size_ = head.size();
      } else if (head.size() != response_size_) {
        return false;
      }
    }
    return true;
  }

  LoopRunner runner_;
  tern::testing::TempDir root_;
  tern::testing::LoopOwned<http::HttpServer> server_;
  std::unique_ptr<files::StaticFiles> files_;
  size_t response_size_ = 0;
};

TEST_F(SteadyStateAllocations, KeepAliveRequestsForASmallFileAllocateNothing) {
  RawClient client(server_->listen_address().port());
  ASSERT_TRUE(exchange(client, kWarmup));
  runner_.run([] {
    g_allocations = 0;
    t_counting = true;
  });
  ASSERT_TRUE(exchange(client, kMeasured));
  runner_.run([] { t_counting = false; });
  EXPECT_EQ(g_allocations.load(), 0u) << "allocations during " << kMeasured << " requests";
}

TEST_F(SteadyStateAllocations, KeepAliveRequestsForASendfileResponseAllocateNothing) {
  // 100 KiB is above the in-memory limit: head by write, body by sendfile.
  RawClient client(server_->listen_address().port());
  ASSERT_TRUE(exchange(client, kWarmup / 10, "/100k.bin"));
  runner_.run([] {
    g_allocations = 0;
    t_counting = true;
  });
  ASSERT_TRUE(exchange(client, kMeasured / 10, "/100k.bin"));
  runner_.run([] { t_counting = false; });
  EXPECT_EQ(g_allocations.load(), 0u) << "allocations during " << kMeasured / 10 << " requests";
}

TEST_F(SteadyStateAllocations, CounterSeesAllocationsOnTheLoopThread) {
  // The measurement above must be able to fail.
  runner_.run([] {
    g_allocations = 0;
    t_counting = true;
    auto leak_check = std::make_unique<std::string>(100, 'x');
    t_counting = false;
  });
  EXPECT_GE(g_allocations.load(), 1u);
}

// ---- Relayed to an upstream ----

// The upstream: answers each request with 1 KiB, holding the answers until
// `hold_for` requests are waiting (so that many are in flight at once).
class CannedUpstream {
 public:
  explicit CannedUpstream(net::EventLoop* loop) : server_(loop, net::InetAddress(0, true)) {
    server_.set_message_callback([this](net::TcpConnection& conn, net::Buffer& input) {
      for (size_t end; (end = input.view().find("\r\n\r\n")) != std::string_view::npos;) {
        input.retrieve(end + 4);
        waiting_.push_back(&conn);
      }
      if (waiting_.size() < hold_for_) return;
      for (net::TcpConnection* waiting : waiting_) waiting->send(response_);
      waiting_.clear();
    });
  }
  Result<void> start() { return server_.start(); }
  uint16_t port() const { return server_.listen_address().port(); }
  void hold_for(size_t requests) { hold_for_ = requests; }

 private:
  net::TcpServer server_;
  std::vector<net::TcpConnection*> waiting_;
  size_t hold_for_ = 1;
  const std::string response_ = "HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n" + std::string(1024, 'u');
};

// Every request, relayed to the group as the proxy handler does.
class RelayAll : public http::RequestHandler {
 public:
  explicit RelayAll(upstream::Group* group) : group_(group) {}
  http::Claim claim(http::Route& /*route*/) override { return http::Claim::kExchange; }
  void start(const http::Route& /*route*/, http::Exchange& exchange) override {
    proxy::ForwardOptions forward;
    forward.target = exchange.request().target();
    forward.client = &exchange.peer_address();
    upstream::Call::start<proxy::HttpCodec>(exchange, *group_, upstream::CallOptions{}, nullptr,
                                           exchange.request(), forward);
  }

 private:
  upstream::Group* group_;
};

class RelayedAllocations : public ::testing::Test {
 protected:
  static constexpr size_t kClients = 200;  // above the request states a quiet loop keeps

  void SetUp() override {
    // Four descriptors a client: its own, the server's, and a pooled
    // connection's two ends.
    rlimit limit{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
    limit.rlim_cur = std::max<rlim_t>(limit.rlim_cur, std::min<rlim_t>(limit.rlim_max, 4096));
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &limit), 0);
    ASSERT_GE(limit.rlim_cur, 4 * kClients + 100) << "too few descriptors for the test";
    runner_.run([&] {
      upstream_ = std::make_unique<CannedUpstream>(runner_.loop());
      ASSERT_TRUE(upstream_->start().ok());
      net::ConnectionPoolOptions pool;
      pool.address = net::InetAddress(upstream_->port(), true);
      pool.max_connections = kClients;
      pool.max_idle = kClients;  // all kept between rounds (as an [[upstream]] with keepalive = 200)
      upstream::GroupServer server;
      server.address = pool.address;
      server.spec.address = pool.address.to_string();
      group_ = std::make_unique<upstream::Group>(runner_.loop(), "canned", std::vector{server},
                                                 upstream::Balancer::Method::kRoundRobin, pool);
    });
    server_ = tern::testing::make_on_loop<http::HttpServer>(runner_, runner_.loop(), net::InetAddress(0, true));
    runner_.run([&] {
      server_->add_handler(std::make_unique<RelayAll>(group_.get()));
      ASSERT_TRUE(server_->start().ok());
    });
    for (size_t i = 0; i < kClients; ++i) {
      clients_.push_back(std::make_unique<RawClient>(server_->listen_address().port()));
      ASSERT_TRUE(clients_.back()->ok());
    }
  }
  void TearDown() override {
    clients_.clear();
    server_.reset();
    runner_.run([&] {
      group_.reset();
      upstream_.reset();
    });
  }

  // Each of the first `count` clients sends a request, then each reads its
  // response: `count` requests in flight at once. False if one goes wrong.
  bool round(size_t count) {
    static const std::string request = "GET /x HTTP/1.1\r\nHost: x\r\n\r\n";
    for (size_t i = 0; i < count; ++i) {
      if (!clients_[i]->send_all(request)) return false;
    }
    for (size_t i = 0; i < count; ++i) {
      std::string head = clients_[i]->read_exactly(response_size_ == 0 ? 1 : response_size_);
      if (response_size_ == 0) {
        head += clients_[i]->read_to_eof(nullptr, std::chrono::milliseconds(200));
        if (head.find("200 OK") == std::string::npos || !head.ends_with(std::string(1024, 'u'))) return false;
        response_size_ = head.size();
      } else if (head.size() != response_size_ || !head.ends_with('u')) {
        return false;
      }
    }
    return true;
  }

  // Allocations per request over `rounds` rounds of `count` clients.
  double allocations_per_request(size_t count, int rounds) {
    // Every client once first: the server has accepted them all (a
    // connection accepted while counting would count), and the pool has
    // its connections.
    runner_.run([&] { upstream_->hold_for(1); });
    if (!round(kClients)) return -1;
    runner_.run([&] { upstream_->hold_for(count); });
    for (int i = 0; i < 3; ++i) {
      if (!round(count)) return -1;  // warm-up: pools and connections made
    }
    runner_.run([] {
      g_allocations = 0;
      t_counting = true;
    });
    for (int i = 0; i < rounds; ++i) {
      if (!round(count)) return -1;
    }
    runner_.run([] { t_counting = false; });
    return static_cast<double>(g_allocations.load()) / static_cast<double>(count * static_cast<size_t>(rounds));
  }

  LoopRunner runner_;
  std::unique_ptr<CannedUpstream> upstream_;
  std::unique_ptr<upstream::Group> group_;
  tern::testing::LoopOwned<http::HttpServer> server_;
  std::vector<std::unique_ptr<RawClient>> clients_;
  size_t response_size_ = 0;
};

TEST_F(RelayedAllocations, OneRequestInFlightMakesTwoAllocations) {
  const double per_request = allocations_per_request(1, 2000);
  ASSERT_GE(per_request, 0) << "a relayed request failed";
  EXPECT_LE(per_request, 2.0);
}

TEST_F(RelayedAllocations, HundredsInFlightMakeNoMore) {
  // 200 requests waiting on the upstream at once: each needs its request
  // state, and the loop keeps them for the next round instead of freeing
  // all but a few and making them again.
  const double per_request = allocations_per_request(kClients, 20);
  ASSERT_GE(per_request, 0) << "a relayed request failed";
  EXPECT_LE(per_request, 2.0);
}

// A rate limit's table is made whole at start: checking keys, new ones
// pushing old ones out included, allocates nothing.
TEST(RateLimitAllocations, CheckingKeysAllocatesNothing) {
  RateLimit limit({.rate_milli = 10'000, .burst = 5, .size = 256});
  char text[32];
  auto key = [&text](int i) {
    const auto end = std::to_chars(text, text + sizeof text, i).ptr;
    return std::string_view(text, static_cast<size_t>(end - text));
  };
  t_counting = true;
  const size_t before = g_allocations.load();
  int allowed = 0;
  for (int i = 0; i < 10'000; ++i) allowed += limit.check(key(i % 1000), i).allowed ? 1 : 0;
  const size_t made = g_allocations.load() - before;
  t_counting = false;
  EXPECT_EQ(made, 0u);
  EXPECT_GT(allowed, 0);
}

}  // namespace
}  // namespace tern::server
