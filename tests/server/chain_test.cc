// The handler chain on an in-memory harness: request bytes through the real
// parser, resolved by the chain as the server does, answered by the
// location's handlers into memory, read back as response bytes. No socket.
#include "server/chain.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sys/stat.h>

#include "http1/request_parser.h"
#include "net/event_loop.h"
#include "net/inet_address.h"
#include "server/observability/metrics.h"
#include "support/exchange_harness.h"
#include "support/temp_dir.h"

namespace tern::server {
namespace {

struct Answer {
  int status = 0;
  std::string head;
  std::string body;
  Claim claim = Claim::kPass;
  std::string header(std::string_view name) const {
    return testing::ParsedResponse{status, head, body, true}.header(name);
  }
};

class ChainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::mkdir(dir_.at("www").c_str(), 0755);
    ::mkdir(dir_.at("www/app").c_str(), 0755);
    ::mkdir(dir_.at("www/errors").c_str(), 0755);
    write("www/index.html", "home\n");
    write("www/app/index.html", "spa shell\n");
    write("www/errors/404.html", "custom 404\n");
    write("www/.env", "SECRET=1\n");
  }

  void write(const std::string& path, const std::string& text) { std::ofstream(dir_.at(path)) << text; }

  void load(const std::string& sites) {
    const std::string path = dir_.at("tern.toml");
    std::ofstream(path) << sites << "\n[static]\nroot = \"" << dir_.at("www") << "\"\n";
    Config config = load_config(path);
    chain_ = std::make_shared<const Chain>(std::make_shared<const Sites>(config, metrics_), config,
                                           std::make_shared<files::MimeTypes>(), nullptr, nullptr, nullptr, &loops_,
                                           metrics_);
    loops_.emplace(&loop_, chain_);
  }

  // `raw` through the parser and the chain, from `peer`, answered as
  // Http1Connection answers: at once, or through an exchange (here one
  // carried in memory) when the handler takes one or a body follows; with
  // metrics_, counted as the server's response callback counts.
  Answer ask(const std::string& raw, const char* peer = "127.0.0.1") {
    testing::MemoryExchange ex(&loop_, raw, peer);
    EXPECT_TRUE(ex.parsed()) << raw;
    http::Route route;
    route.request = &ex.request();
    route.client = &ex.peer_address();
    route.local = &ex.local_address();
    route.path = ex.request().path();
    ChainLoop& chain = *loops_.current();
    const Claim claim = chain.claim(route);
    EXPECT_NE(claim, Claim::kPass);
    Answer answer;
    answer.claim = claim;
    ex.start([&](http::Exchange& exchange) {
      if (claim == Claim::kExchange) return chain.start(exchange);
      chain.respond(exchange.request(), exchange.writer());
      exchange.finish();
    });
    EXPECT_TRUE(ex.run(std::chrono::seconds(5)));
    const testing::ParsedResponse response = ex.response();
    if (metrics_ != nullptr) metrics_->record(&loop_, ex.request(), response.status);
    EXPECT_TRUE(response.complete) << ex.output();
    answer.status = response.status;
    answer.head = response.head;
    answer.body = response.body;
    return answer;
  }
  static std::string get(std::string_view path, std::string_view host = "t", std::string_view extra = "") {
    return "GET " + std::string(path) + " HTTP/1.1\r\nHost: " + std::string(host) + "\r\n" +
           std::string(extra) + "\r\n";
  }

  net::EventLoop loop_;  // this thread's: the clock and the per-loop slots
  testing::TempDir dir_;
  net::LoopLocal<ChainLoop> loops_;
  std::shared_ptr<const Chain> chain_;
  Metrics* metrics_ = nullptr;  // set before load() to count
};

TEST_F(ChainTest, TheImplicitSiteServesItsRootAndRefusesDotfiles) {
  load("");
  Answer home = ask(get("/"));
  EXPECT_EQ(home.status, 200);
  EXPECT_EQ(home.body, "home\n");
  EXPECT_EQ(ask(get("/.env")).status, 403);
  EXPECT_EQ(ask(get("/missing")).status, 404);
  EXPECT_EQ(ask(get("/a/%2e%2e/%2e%2e/etc/passwd")).status, 400);
}

TEST_F(ChainTest, LocationsAnswerInNginxOrderWithTheirSettings) {
  load(R"(
[[server]]
error_page = { 404 = "/errors/404.html" }
  [[server.location]]
  prefix = "/"
  [[server.location]]
  prefix = "/app/"
  try_files = ["$uri", "/app/index.html"]
  headers = { X-Frame-Options = "DENY" }
  expires = "1h"
  [[server.location]]
  regex = '^/old/(\w+)$'
  return = { status = 301, url = "/new/$1$is_args$args" }
  [[server.location]]
  prefix = "/lan/"
  allow = ["10.0.0.0/8"]
  return = { status = 200, body = "inside" }
  [[server.location]]
  prefix = "/ro/"
  methods = ["GET"]
  return = { status = 200, body = "read" }
  [[server.location]]
  prefix = "/errors/"
  internal = true
)");
  Answer spa = ask(get("/app/deep/link"));
  EXPECT_EQ(spa.status, 200);
  EXPECT_EQ(spa.body, "spa shell\n");
  EXPECT_EQ(spa.header("X-Frame-Options"), "DENY");
  EXPECT_EQ(spa.header("Cache-Control"), "max-age=3600");

  Answer moved = ask(get("/old/page?x=1"));
  EXPECT_EQ(moved.status, 301);
  EXPECT_EQ(moved.header("Location"), "/new/page?x=1");

  EXPECT_EQ(ask(get("/lan/x"), "127.0.0.1").status, 403);
  EXPECT_EQ(ask(get("/lan/x"), "10.1.2.3").body, "inside");

  Answer refused = ask("DELETE /ro/x HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_EQ(refused.status, 405);
  EXPECT_EQ(refused.header("Allow"), "GET, HEAD");
  EXPECT_EQ(ask("HEAD /ro/x HTTP/1.1\r\nHost: t\r\n\r\n").status, 200);

  Answer missing = ask(get("/nothing"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body, "custom 404\n");
  EXPECT_EQ(ask(get("/errors/404.html")).status, 404);  // internal
}

// A site's response fields reach every location, which adds to them,
// replaces one by name, or takes one out (an empty value, headers_remove),
// whoever wrote it: the handler, a file's prepared fields, the Server field.
TEST_F(ChainTest, LocationsInheritTheSitesFieldsAndMayDropAny) {
  load(R"([[server]]
headers = { Strict-Transport-Security = "max-age=63072000", X-Frame-Options = "DENY" }
headers_always = { X-Site = "shop" }
headers_remove = ["X-Powered-By"]
  [[server.location]]
  prefix = "/plain/"
  return = { status = 200, body = "plain" }
  [[server.location]]
  prefix = "/framed/"
  headers = { X-Frame-Options = "SAMEORIGIN", Server = "", X-Extra = "1" }
  headers_remove = ["Content-Type"]
  return = { status = 200, body = "framed" }
  [[server.location]]
  prefix = "/"
  headers = { X-Frame-Options = "" }
  headers_remove = ["ETag"]
)");
  Answer plain = ask(get("/plain/x"));
  EXPECT_EQ(plain.header("Strict-Transport-Security"), "max-age=63072000");
  EXPECT_EQ(plain.header("X-Frame-Options"), "DENY");
  EXPECT_EQ(plain.header("X-Site"), "shop");
  EXPECT_EQ(plain.header("Server"), "tern");
  Answer framed = ask(get("/framed/x"));
  EXPECT_EQ(framed.body, "framed");
  EXPECT_EQ(framed.header("Strict-Transport-Security"), "max-age=63072000");  // inherited
  EXPECT_EQ(framed.header("X-Frame-Options"), "SAMEORIGIN");                 // replaced
  EXPECT_EQ(framed.header("X-Extra"), "1");
  EXPECT_EQ(framed.header("Server"), "") << framed.head;
  EXPECT_EQ(framed.header("Content-Type"), "") << framed.head;
  Answer file = ask(get("/index.html"));
  EXPECT_EQ(file.body, "home\n");
  EXPECT_EQ(file.header("X-Frame-Options"), "") << file.head;
  EXPECT_EQ(file.header("ETag"), "") << file.head;
  EXPECT_NE(file.header("Last-Modified"), "") << file.head;
  // What no location answers still has the site's.
  Answer missing = ask(get("/nothing"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.header("X-Site"), "shop");
}

TEST_F(ChainTest, ReturnNamesTheSiteThePortAndTheRegexsNamedGroups) {
  load(R"([[server]]
names = ["shop.test", "www.shop.test"]
  [[server.location]]
  regex = '^/item/(?<id>[0-9]+)/(?<slug>[a-z-]+)$'
  return = { status = 301, url = "https://$server_name/items/$id?slug=${slug}&from=$1" }
  [[server.location]]
  prefix = "/where"
  return = { status = 200, body = "$server_name:$server_port" }
)");
  Answer moved = ask(get("/item/42/blue-shoe", "www.shop.test"));
  EXPECT_EQ(moved.status, 301);
  EXPECT_EQ(moved.header("Location"), "https://shop.test/items/42?slug=blue-shoe&from=42");
  Answer where = ask(get("/where", "shop.test"));
  EXPECT_EQ(where.body.substr(0, where.body.find(':')), "shop.test");
  EXPECT_NE(where.body.find(':'), std::string::npos);
}

// Each variable in its place, literal text between kept, ${name} as
// $name; $uri percent-encoded in a URL and not in a body.
TEST_F(ChainTest, ReturnExpandsEveryVariableInItsPlace) {
  load(R"([[server]]
names = ["shop.test"]
  [[server.location]]
  prefix = "/body/"
  return = { status = 200, body = "s=$scheme h=$host r=$request_uri u=$uri a=$args i=$is_args c=$remote_addr n=$server_name ${uri}x" }
  [[server.location]]
  prefix = "/url/"
  return = { status = 302, url = "/to$uri$is_args$args" }
)");
  Answer body = ask(get("/body/a%20b?q=1", "Shop.Test:80"), "192.0.2.7");
  EXPECT_EQ(body.body,
            "s=http h=shop.test r=/body/a%20b?q=1 u=/body/a b a=q=1 i=? c=192.0.2.7 n=shop.test /body/a bx");
  Answer none = ask(get("/body/", "shop.test"));
  EXPECT_EQ(none.body, "s=http h=shop.test r=/body/ u=/body/ a= i= c=127.0.0.1 n=shop.test /body/x");
  Answer moved = ask(get("/url/a%20b?x=y", "shop.test"));
  EXPECT_EQ(moved.header("Location"), "/to/url/a%20b?x=y");
}

// error_page: a page of the site with the error's status or another
// ("=200 /page"), or a redirect ("https://...", "=301 https://...").
TEST_F(ChainTest, ErrorPagesMayChangeTheStatusOrRedirect) {
  load(R"([[server]]
error_page = { 404 = "=200 /app/index.html", 403 = "https://help.example.com/denied", 405 = "=301 https://example.com/ro" }
  [[server.location]]
  prefix = "/ro/"
  methods = ["GET"]
  return = { status = 200, body = "read" }
  [[server.location]]
  prefix = "/closed/"
  deny = true
  [[server.location]]
  prefix = "/"
)");
  Answer missing = ask(get("/nothing"));
  EXPECT_EQ(missing.status, 200);
  EXPECT_EQ(missing.body, "spa shell\n");
  Answer denied = ask(get("/closed/x"));
  EXPECT_EQ(denied.status, 302);
  EXPECT_EQ(denied.header("Location"), "https://help.example.com/denied");
  Answer moved = ask("DELETE /ro/x HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_EQ(moved.status, 301);
  EXPECT_EQ(moved.header("Location"), "https://example.com/ro");
}

// A regex location's alias takes its captures: nginx's
// `location ~ ... { alias /dir/$1; }`.
TEST_F(ChainTest, ARegexLocationsAliasTakesItsCaptures) {
  ::mkdir(dir_.at("files").c_str(), 0755);
  write("files/report.txt", "the report\n");
  load(std::string(R"([[server]]
  [[server.location]]
  regex = '^/dl/(?<name>[a-z]+)\.txt$'
  alias = ")") + dir_.at("files") + R"(/$name.txt"
  [[server.location]]
  regex = '^/by-number/([a-z]+)$'
  alias = ")" + dir_.at("files") + R"(/$1.txt"
)");
  Answer found = ask(get("/dl/report.txt"));
  EXPECT_EQ(found.status, 200);
  EXPECT_EQ(found.body, "the report\n");
  EXPECT_EQ(ask(get("/by-number/report")).body, "the report\n");
  EXPECT_EQ(ask(get("/dl/missing.txt")).status, 404);
}

// try_files may end at a named location, which takes the request as it is.
TEST_F(ChainTest, TryFilesMayEndAtANamedLocation) {
  load(R"([[server]]
  [[server.location]]
  prefix = "/"
  try_files = ["$uri", "@app"]
  [[server.location]]
  named = "@app"
  return = { status = 200, body = "app saw $uri" }
)");
  EXPECT_EQ(ask(get("/index.html")).body, "home\n");
  Answer app = ask(get("/some/route"));
  EXPECT_EQ(app.status, 200);
  EXPECT_EQ(app.body, "app saw /some/route");
  EXPECT_EQ(ask(get("/@app")).status, 200);  // a path, not the name: tried as a file, then @app
}

// access: nginx's allow and deny in order, the first match deciding.
TEST_F(ChainTest, AccessRulesDecideInOrderTheFirstMatchWinning) {
  load(R"([[server]]
  [[server.location]]
  prefix = "/admin/"
  access = ["deny 10.1.2.3", "allow 10.0.0.0/8", "allow 2001:db8::/32", "deny all"]
  return = { status = 200, body = "admin" }
  [[server.location]]
  prefix = "/open/"
  access = ["deny 10.9.0.0/16"]
  return = { status = 200, body = "open" }
)");
  EXPECT_EQ(ask(get("/admin/"), "10.1.2.3").status, 403);
  EXPECT_EQ(ask(get("/admin/"), "10.1.2.4").body, "admin");
  EXPECT_EQ(ask(get("/admin/"), "192.0.2.1").status, 403);
  EXPECT_EQ(ask(get("/open/"), "10.9.1.1").status, 403);
  EXPECT_EQ(ask(get("/open/"), "192.0.2.1").body, "open");  // no rule matched: allowed
}

// Behind a trusted proxy the request's client is the one it names, and
// allow/deny judge that client; an untrusted peer's claim changes nothing.
TEST_F(ChainTest, AllowJudgesTheClientTrustedProxiesName) {
  load(R"(blocked = ["192.0.2.66/32"]
[[server]]
real_ip = { from = ["10.0.0.0/8"] }
  [[server.location]]
  prefix = "/lan/"
  allow = ["192.0.2.0/24"]
  return = { status = 200, body = "inside" }
)");
  const std::string forwarded = "GET /lan/ HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 192.0.2.7\r\n\r\n";
  EXPECT_EQ(ask(forwarded, "10.0.0.5").body, "inside");
  EXPECT_EQ(ask(get("/lan/"), "10.0.0.5").status, 403);
  EXPECT_EQ(ask(forwarded, "198.51.100.1").status, 403);
  EXPECT_EQ(ask(get("/lan/"), "192.0.2.8").body, "inside");
  // A blocked client is refused behind the proxy too.
  EXPECT_EQ(ask("GET /lan/ HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 192.0.2.66\r\n\r\n", "10.0.0.5").status, 403);
}

// Static files answer from the head; a body behind it is dropped (the
// exchange finishes before the body is in).
TEST_F(ChainTest, AStaticAnswerToARequestWithABodyComesFromTheHead) {
  load("");
  Answer answer = ask("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_EQ(answer.claim, Claim::kRespond);
  EXPECT_EQ(answer.status, 405);
  EXPECT_EQ(answer.header("Allow"), "GET, HEAD");
}

TEST_F(ChainTest, CompressionIsAnOutputFilterOnTheWriter) {
  std::string page;
  while (page.size() < 4000) page += "<p>compressible text</p>\n";
  write("www/page.html", page);
  load("[compression]\nenabled = true\n");
  Answer plain = ask(get("/page.html"));
  EXPECT_EQ(plain.body, page);
  EXPECT_EQ(plain.header("Vary"), "Accept-Encoding");
  Answer coded = ask(get("/page.html", "t", "Accept-Encoding: gzip\r\n"));
  EXPECT_EQ(coded.header("Content-Encoding"), "gzip");
  EXPECT_LT(coded.body.size(), page.size() / 4);
  EXPECT_EQ(coded.header("Content-Length"), std::to_string(coded.body.size()));
  EXPECT_EQ(coded.header("ETag").substr(0, 2), "W/");
}

}  // namespace
}  // namespace tern::server

namespace tern::server {
namespace {

// Tag every request with its site and location, and answer the figures at
// a metrics location (only to the clients its allow admits).
TEST_F(ChainTest, MetricsCountRequestsByLocationAndAnswerThem) {
  Metrics metrics;
  metrics.set_enabled(true);
  metrics_ = &metrics;
  load(R"(
[[server]]
names = ["example.com"]
  [[server.location]]
  prefix = "/"
  [[server.location]]
  exact = "/metrics"
  metrics = "prometheus"
  allow = ["127.0.0.1/32"]
  [[server.location]]
  prefix = "/status"
  metrics = "status"
)");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(ask(get("/")).status, 200);
  EXPECT_EQ(ask(get("/missing")).status, 404);
  EXPECT_EQ(ask(get("/metrics"), "10.0.0.1").status, 403);

  Answer text = ask(get("/metrics"));
  EXPECT_EQ(text.status, 200);
  EXPECT_EQ(text.header("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(text.header("Cache-Control"), "no-store");
  EXPECT_NE(text.body.find("tern_requests_total{site=\"example.com\",location=\"/\",class=\"2xx\"} 3\n"),
            std::string::npos) << text.body;
  EXPECT_NE(text.body.find("tern_requests_total{site=\"example.com\",location=\"/\",class=\"4xx\"} 1\n"),
            std::string::npos) << text.body;
  EXPECT_NE(text.body.find("tern_requests_total{site=\"example.com\",location=\"= /metrics\",class=\"4xx\"} 1\n"),
            std::string::npos) << text.body;

  Answer page = ask(get("/status"));
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.header("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("<canvas"), std::string::npos);
  Answer json = ask(get("/status?x=1&format=json"));
  EXPECT_EQ(json.header("Content-Type"), "application/json");
  EXPECT_NE(json.body.find("\"location\":\"= /metrics\",\"by_class\":{\"1xx\":0,\"2xx\":1,"), std::string::npos)
      << json.body;
  EXPECT_EQ(ask("POST /metrics HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n").status, 405);
}

}  // namespace
}  // namespace tern::server
