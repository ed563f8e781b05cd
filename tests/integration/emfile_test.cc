// The echo server, started with a descriptor limit of 64, is sent more
// connections than it can hold. It must not spin on the pending connections,
// must log the condition at most once a second, and must serve again once the
// connections close.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "support/child_process.h"
#include "support/raw_socket.h"

namespace tern::net {
namespace {

using namespace std::chrono_literals;
using tern::testing::ChildProcess;
using tern::testing::RawClient;

int count_lines_containing(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  int count = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) ++count;
  }
  return count;
}

TEST(EmfileTest, ServerSurvivesRunningOutOfDescriptorsAndServesAgain) {
  const std::string log_path = "/tmp/tern-emfile-" + std::to_string(::getpid()) + ".log";
  ChildProcess server({TERN_ECHO_SERVER_PATH, "--port", "0", "--threads", "0"}, 64, log_path);
  std::smatch match;
  std::string banner = server.read_line();
  ASSERT_TRUE(std::regex_search(banner, match, std::regex(":([0-9]+)$"))) << banner;
  const auto port = static_cast<uint16_t>(std::stoi(match[1]));
  auto start = std::chrono::steady_clock::now();

  // 150 connections against a 64-descriptor limit; the kernel completes every
  // handshake, the server can take about 55.
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 150; ++i) {
    clients.push_back(std::make_unique<RawClient>(port));
    ASSERT_TRUE(clients.back()->ok());
  }
  int served = 0;
  int refused = 0;
  for (auto& c : clients) {
    if (!c->send_all("ping")) {
      ++refused;
      continue;
    }
    if (c->read_exactly(4, 2s) == "ping") {
      ++served;
    } else {
      ++refused;
    }
  }
  EXPECT_GT(served, 30);
  EXPECT_GT(refused, 50) << "the limit did not bite";

  // With the excess shed, the server must be idle, not spinning on accept.
  long before = server.cpu_ticks();
  std::this_thread::sleep_for(1s);
  long used = server.cpu_ticks() - before;
  EXPECT_LE(used, sysconf(_SC_CLK_TCK) / 5) << "server burnt " << used << " ticks while idle";

  clients.clear();
  std::this_thread::sleep_for(200ms);
  for (int i = 0; i < 20; ++i) {
    RawClient again(port);
    ASSERT_TRUE(again.ok());
    ASSERT_TRUE(again.send_all("again"));
    EXPECT_EQ(again.read_exactly(5, 5s), "again") << "connection " << i << " after recovery";
  }

  auto seconds = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start).count();
  int lines = count_lines_containing(log_path, "Too many open files");
  EXPECT_GE(lines, 1) << "exhaustion was not logged";
  EXPECT_LE(lines, seconds + 1) << "exhaustion logged more than once a second";
  ::unlink(log_path.c_str());
}

}  // namespace
}  // namespace tern::net
