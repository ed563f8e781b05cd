// BackgroundExchange: a copy of a client's GET that no connection carries.
#include "server/handlers/background_exchange.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "http/error_page.h"
#include "net/event_loop.h"
#include "support/exchange_harness.h"

namespace tern::server {
namespace {

class BackgroundExchangeTest : public ::testing::Test {
 protected:
  // Starts a refresh from a client's request and returns what its handler
  // saw; the client's exchange is then finished and gone, as it is when a
  // cache answers it from a stale entry.
  struct Seen {
    bool ran = false;
    std::string method, target, host, probe, range, client;
    http::ExchangeId id;
  };
  Seen refresh_from(const std::string& raw, std::shared_ptr<const void> kept,
                    std::function<void(http::Exchange&)> then) {
    Seen seen;
    testing::MemoryExchange client(&loop_, raw, "192.0.2.7");
    EXPECT_TRUE(client.parsed());
    client.start([&](http::Exchange& ex) {
      ex.request().set_client_address(net::InetAddress::from_ip_port("198.51.100.9", 0).value());
      ex.keep(kept);
      EXPECT_TRUE(BackgroundExchange::start(ex, [&](http::Exchange& refresh) {
        seen.ran = true;
        const http::Request& r = refresh.request();
        seen.method = std::string(r.method_text());
        seen.target = std::string(r.target());
        seen.host = std::string(r.host());
        seen.probe = std::string(r.header("X-Probe"));
        seen.range = std::string(r.header(http::FieldId::kRange));
        seen.client = refresh.client_address().to_ip();
        seen.id = refresh.id();
        then(refresh);
      }));
      ex.writer().start(200).body("stale");
      ex.finish();
    });
    EXPECT_TRUE(client.finished());
    return seen;
  }
  // Turns the loop for one round (what ends after the round goes).
  void round() {
    loop_.queue_in_loop([this] { loop_.quit(); });
    loop_.wakeup();  // queued from the loop's own thread, which is not waiting
    loop_.loop();
  }

  net::EventLoop loop_;
};

TEST_F(BackgroundExchangeTest, TheCopyHasTheClientsTargetFieldsAndAddressAndOutlivesItsExchange) {
  http::ExchangeId id;
  Seen seen = refresh_from(
      "GET /page?q=1 HTTP/1.1\r\nHost: shop.example\r\nX-Probe: yes\r\nRange: bytes=0-1\r\n\r\n", nullptr,
      [&](http::Exchange& refresh) {
        id = refresh.id();
        // Answered later, as a call does: the client's exchange is gone by then.
        loop_.queue_in_loop([id] {
          http::Exchange* ex = http::Exchange::find(id);
          ASSERT_NE(ex, nullptr);
          ex->writer().start(200).header("X-A", "b").begin_stream();
          ex->writer().write("a body nobody reads");
          ex->writer().end_stream();
          ex->finish();
        });
      });
  ASSERT_TRUE(seen.ran);
  EXPECT_EQ(seen.method, "GET");
  EXPECT_EQ(seen.target, "/page?q=1");
  EXPECT_EQ(seen.host, "shop.example");
  EXPECT_EQ(seen.probe, "yes");
  EXPECT_EQ(seen.range, "bytes=0-1");  // the handler decides what it forwards
  EXPECT_EQ(seen.client, "198.51.100.9");  // the client's, not the peer's
  EXPECT_NE(http::Exchange::find(id), nullptr);
  round();
  EXPECT_EQ(http::Exchange::find(id), nullptr);
}

TEST_F(BackgroundExchangeTest, TheClientsConfigurationIsKeptUntilTheRefreshEndsThenLetGo) {
  auto config = std::make_shared<int>(7);
  std::weak_ptr<int> watch = config;
  http::ExchangeId id;
  refresh_from("GET / HTTP/1.1\r\nHost: a\r\n\r\n", config, [&](http::Exchange& refresh) { id = refresh.id(); });
  config.reset();
  round();
  EXPECT_FALSE(watch.expired());  // the refresh still runs
  http::Exchange* ex = http::Exchange::find(id);
  ASSERT_NE(ex, nullptr);
  // A drain wait comes back on the next round (nothing is ever pending).
  bool drained = false;
  ex->set_drain_handler([&] { drained = true; });
  ex->wait_for_drain();
  round();
  EXPECT_TRUE(drained);
  http::write_error_page(ex->writer(), 502);
  ex->abort();
  round();
  EXPECT_EQ(http::Exchange::find(id), nullptr);
  EXPECT_TRUE(watch.expired());
}

TEST_F(BackgroundExchangeTest, AHandlerThatFinishesAtOnceLeavesNothingBehind) {
  auto config = std::make_shared<int>(1);
  std::weak_ptr<int> watch = config;
  http::ExchangeId id;
  refresh_from("GET /x HTTP/1.0\r\n\r\n", config, [&](http::Exchange& refresh) {
    id = refresh.id();
    refresh.writer().start(404).body("no");
    refresh.finish();
  });
  config.reset();
  round();
  EXPECT_EQ(http::Exchange::find(id), nullptr);
  EXPECT_TRUE(watch.expired());
}

}  // namespace
}  // namespace tern::server
