// DnsResolver against a real DNS server: dnsmasq on a loopback port,
// answering from a hosts file the test rewrites (and reloads with SIGHUP).
#include "net/dns_resolver.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <future>
#include <thread>

#include "support/child_process.h"
#include "support/loop_runner.h"
#include "support/temp_dir.h"

namespace tern::net {
namespace {

using namespace std::chrono_literals;

const char* const kDnsmasq = "/usr/sbin/dnsmasq";

uint16_t free_udp_port() {
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

class DnsResolverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(kDnsmasq, X_OK) != 0) GTEST_SKIP() << "no dnsmasq (Debian dnsmasq; ./scripts/test installs it)";
    write_hosts("10.1.2.3 app.test\n10.1.2.4 app.test\n2001:db8::7 app.test\n");
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = free_udp_port();
      dnsmasq_ = std::make_unique<tern::testing::ChildProcess>(
          std::vector<std::string>{kDnsmasq, "--keep-in-foreground", "--port=" + std::to_string(port_),
                                   "--listen-address=127.0.0.1", "--bind-interfaces", "--no-resolv", "--no-hosts",
                                   "--addn-hosts=" + dir_.at("hosts"), "--local-ttl=7", "--conf-file=/dev/null",
                                   "--user=" + std::string(::geteuid() == 0 ? "root" : ""), "--pid-file="},
          1024, dir_.at("dnsmasq.log"));
      ASSERT_GT(dnsmasq_->pid(), 0);
      runner_.run([&] { resolver_.reset(); });
      auto made = DnsResolver::make(runner_.loop(), {.servers = {"127.0.0.1:" + std::to_string(port_)},
                                                      .timeout = 500ms, .tries = 2});
      ASSERT_TRUE(made.ok()) << made.error().message();
      resolver_ = std::move(*made);
      // Until dnsmasq answers (its first start may take seconds on a cold
      // or busy machine), or exits: a port free for UDP may be taken for
      // TCP, which a loaded machine's dnsmasq can take a while to find
      // (a fixed wait for its exit once let a dead one through): then
      // another port.
      const auto deadline = std::chrono::steady_clock::now() + 15s;
      bool exited = false;
      while (!ask("app.test").ok() && std::chrono::steady_clock::now() < deadline) {
        if (::waitpid(dnsmasq_->pid(), nullptr, WNOHANG) == dnsmasq_->pid()) {
          exited = true;
          break;
        }
        std::this_thread::sleep_for(20ms);
      }
      if (!exited) break;
    }
  }
  std::string log() const {
    std::ifstream in(dir_.at("dnsmasq.log"));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  void TearDown() override {
    runner_.run([&] { resolver_.reset(); });
  }
  void write_hosts(const std::string& text) { std::ofstream(dir_.at("hosts")) << text; }
  DnsResolver::Answer ask(const std::string& name, uint16_t port = 3000) {
    std::promise<DnsResolver::Answer> answered;
    runner_.run([&] { resolver_->resolve(name, port, [&](DnsResolver::Answer a) { answered.set_value(std::move(a)); }); });
    auto future = answered.get_future();
    if (future.wait_for(10s) != std::future_status::ready) {
      DnsResolver::Answer none;
      none.error = "no answer within 10 s";
      return none;
    }
    return future.get();
  }
  static std::vector<std::string> ips(const DnsResolver::Answer& answer) {
    std::vector<std::string> out;
    for (const InetAddress& a : answer.addresses) out.push_back(a.to_ip_port());
    return out;
  }

  tern::testing::TempDir dir_;
  tern::testing::LoopRunner runner_;
  uint16_t port_ = 0;
  std::unique_ptr<tern::testing::ChildProcess> dnsmasq_;
  std::unique_ptr<DnsResolver> resolver_;
};

TEST_F(DnsResolverTest, EveryAddressOfANameComesSortedWithThePortAndTheTtl) {
  const DnsResolver::Answer answer = ask("app.test");
  ASSERT_TRUE(answer.ok()) << answer.error << "\n" << log();
  EXPECT_EQ(ips(answer), (std::vector<std::string>{"10.1.2.3:3000", "10.1.2.4:3000", "[2001:db8::7]:3000"}));
  EXPECT_EQ(answer.ttl, 7s);
}

TEST_F(DnsResolverTest, ANewAnswerIsSeenOnceTheServerHasIt) {
  write_hosts("10.9.9.9 app.test\n");
  ::kill(dnsmasq_->pid(), SIGHUP);
  std::vector<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    seen = ips(ask("app.test", 80));
    if (seen == std::vector<std::string>{"10.9.9.9:80"}) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(seen, std::vector<std::string>{"10.9.9.9:80"});
}

TEST_F(DnsResolverTest, AnUnknownNameOrASilentServerIsAnErrorNotAHang) {
  EXPECT_FALSE(ask("nothing.test").ok());
  ::kill(dnsmasq_->pid(), SIGSTOP);
  const auto began = std::chrono::steady_clock::now();
  const DnsResolver::Answer answer = ask("other.test");
  EXPECT_FALSE(answer.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - began, 5s) << answer.error;
  ::kill(dnsmasq_->pid(), SIGCONT);
}

TEST_F(DnsResolverTest, AnAddressAnswersItselfAndAnswersComeAfterResolveReturns) {
  std::promise<DnsResolver::Answer> answered;
  std::atomic<bool> called{false};
  const bool inside = runner_.run([&] {
    resolver_->resolve("192.0.2.1", 8080, [&](DnsResolver::Answer a) {
      called = true;
      answered.set_value(std::move(a));
    });
    return called.load();
  });
  EXPECT_FALSE(inside);
  auto answer = answered.get_future().get();
  EXPECT_EQ(ips(answer), std::vector<std::string>{"192.0.2.1:8080"});
}

TEST_F(DnsResolverTest, NoAnswerComesAfterTheResolverIsGone) {
  ::kill(dnsmasq_->pid(), SIGSTOP);
  bool called = false;
  runner_.run([&] {
    resolver_->resolve("late.test", 80, [&](DnsResolver::Answer) { called = true; });
    resolver_.reset();
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(runner_.run([&] { return called; }));
  ::kill(dnsmasq_->pid(), SIGCONT);
}

}  // namespace
}  // namespace tern::net
