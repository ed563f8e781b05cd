// Steady state allocates nothing: 10,000 keep-alive requests for a small
// static file, after a warm-up, make no heap allocation on the loop thread.
// (Its own test binary: it replaces the global operator new.)
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <new>
#include <string>

#include "http/http_server.h"
#include "net/event_loop.h"
#include "server/handlers/static_files.h"
#include "server/handlers/static_handler.h"
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
      StaticFilesOptions options;
      options.root = root_.path();
      files_ = std::make_unique<StaticFiles>(options);
      server_->router().set_fallback([this](const http::Request& r, http::ResponseWriter& w) {
        respond_static(*files_, r, w, runner_.loop()->clock().now());
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
  std::unique_ptr<StaticFiles> files_;
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

}  // namespace
}  // namespace tern::server
