// The Router as a handler of the chain, on the in-memory harness: which
// requests it claims and how, and what its answers look like.
#include "http/router.h"

#include <gtest/gtest.h>

#include <string>

#include "net/event_loop.h"
#include "support/exchange_harness.h"

namespace tern::http {
namespace {

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router_.get("/hello", [](const Request&, ResponseWriter& w) {
      w.start(200).header("Content-Type", "text/plain").body("hello");
    });
    router_.post("/echo", [](const Request& r, ResponseWriter& w) { w.start(200).body(r.body()); });
    router_.prefix(Method::kGet, "/files/", [](const Request& r, ResponseWriter& w) {
      w.start(200).body("files:" + std::string(r.path()));
    });
    router_.prefix(Method::kGet, "/files/deep/", [](const Request&, ResponseWriter& w) {
      w.start(200).body("deep");
    });
  }

  struct Answer {
    Claim claim = Claim::kPass;
    testing::ParsedResponse response;
  };

  // Asks the router about `raw`; answers it as Http1Connection would (the
  // body, if any, is already in `raw`: the request as a Router handler
  // sees it once the body is read).
  Answer ask(const std::string& raw) {
    testing::MemoryExchange ex(&loop_, raw);
    EXPECT_TRUE(ex.parsed()) << raw;
    Request& request = ex.request();
    request.set_body(std::string_view(raw).substr(request.head_size()));
    Route route;
    route.request = &request;
    route.client = &ex.peer_address();
    route.local = &ex.local_address();
    route.path = request.path();
    Answer answer;
    answer.claim = router_.claim(route);
    if (answer.claim == Claim::kPass) return answer;
    ex.start([&](Exchange& exchange) {
      router_.respond(route, exchange.writer());
      exchange.finish();
    });
    EXPECT_TRUE(ex.finished());
    answer.response = ex.response();
    return answer;
  }

  net::EventLoop loop_;
  Router router_;
};

TEST_F(RouterTest, AnExactRouteAnswersWithTheWholeRequest) {
  Answer a = ask("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(a.claim, Claim::kRespondWithBody);
  EXPECT_EQ(a.response.status, 200);
  EXPECT_EQ(a.response.body, "hello");
  EXPECT_EQ(a.response.header("Content-Type"), "text/plain");

  Answer echo = ask("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nbytes");
  EXPECT_EQ(echo.claim, Claim::kRespondWithBody);
  EXPECT_EQ(echo.response.body, "bytes");
}

TEST_F(RouterTest, HeadIsAnsweredByTheGetRouteWithoutABody) {
  Answer a = ask("HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(a.response.status, 200);
  EXPECT_EQ(a.response.header("Content-Length"), "5");
  EXPECT_EQ(a.response.body, "");
}

TEST_F(RouterTest, TheLongestPrefixWins) {
  EXPECT_EQ(ask("GET /files/a.txt HTTP/1.1\r\nHost: x\r\n\r\n").response.body, "files:/files/a.txt");
  EXPECT_EQ(ask("GET /files/deep/b HTTP/1.1\r\nHost: x\r\n\r\n").response.body, "deep");
}

TEST_F(RouterTest, AnotherMethodIs405WithAllowAnsweredFromTheHead) {
  Answer a = ask("DELETE /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(a.claim, Claim::kRespond);  // no need to read a body first
  EXPECT_EQ(a.response.status, 405);
  EXPECT_EQ(a.response.header("Allow"), "GET, HEAD");
}

TEST_F(RouterTest, NoMatchPassesToTheNextHandlerUnlessThereIsAFallback) {
  EXPECT_EQ(ask("GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n").claim, Claim::kPass);
  router_.set_fallback([](const Request&, ResponseWriter& w) { w.start(200).body("fallback"); });
  Answer a = ask("GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(a.claim, Claim::kRespondWithBody);
  EXPECT_EQ(a.response.body, "fallback");
}

TEST_F(RouterTest, PathsAreComparedAsSent) {
  // Still percent-encoded: "/hell%6F" is not "/hello".
  EXPECT_EQ(ask("GET /hell%6F HTTP/1.1\r\nHost: x\r\n\r\n").claim, Claim::kPass);
}

}  // namespace
}  // namespace tern::http
