#include "server/response_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "http1/request_parser.h"

namespace tern::server {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Headers = std::vector<http::Header>;
using Ttl = std::optional<std::chrono::milliseconds>;

Headers cache_control(std::string_view value) { return {{"Cache-Control", value}}; }

std::shared_ptr<CachedResponse> entry(size_t body_bytes, Clock::time_point expires) {
  auto e = std::make_shared<CachedResponse>();
  e->body.assign(body_bytes, 'x');
  e->stored = expires - 1h;
  e->expires = expires;
  return e;
}

TEST(ResponseCacheLifetime, OnlyOkAndMovedPermanentlyAreCached) {
  ResponseCache cache(1 << 20, 30s);
  EXPECT_EQ(cache.lifetime(200, {}), Ttl(30s));
  EXPECT_EQ(cache.lifetime(301, {}), Ttl(30s));
  for (int status : {201, 203, 204, 206, 302, 304, 307, 308, 404, 410, 500, 503}) {
    EXPECT_EQ(cache.lifetime(status, cache_control("max-age=60")), std::nullopt) << status;
  }
}

TEST(ResponseCacheLifetime, SetCookieOrVaryIsNeverCached) {
  ResponseCache cache(1 << 20, 30s);
  EXPECT_EQ(cache.lifetime(200, Headers{{"Set-Cookie", "a=b"}}), std::nullopt);
  EXPECT_EQ(cache.lifetime(200, Headers{{"set-cookie", "a=b"}}), std::nullopt);
  EXPECT_EQ(cache.lifetime(200, Headers{{"Vary", "Accept-Encoding"}}), std::nullopt);
  EXPECT_EQ(cache.lifetime(200, Headers{{"VARY", "*"}}), std::nullopt);
  // Whatever Cache-Control says, in either order.
  EXPECT_EQ(cache.lifetime(200, Headers{{"Cache-Control", "public, max-age=60"}, {"Set-Cookie", "a=b"}}),
            std::nullopt);
  EXPECT_EQ(cache.lifetime(200, Headers{{"Vary", "Cookie"}, {"Cache-Control", "s-maxage=60"}}), std::nullopt);
}

TEST(ResponseCacheLifetime, NoStoreNoCacheAndPrivateAreNeverCached) {
  ResponseCache cache(1 << 20, 30s);
  for (std::string_view value :
       {"no-store", "no-cache", "private", "max-age=60, no-store", "public, max-age=60, private",
        "max-age=60,no-cache", "NO-STORE", "Private", "no-cache=\"Set-Cookie\"", "private=\"X-User\"",
        " s-maxage=60 ,\tno-cache "}) {
    EXPECT_EQ(cache.lifetime(200, cache_control(value)), std::nullopt) << value;
  }
  // In a second Cache-Control field too.
  EXPECT_EQ(cache.lifetime(200, Headers{{"Cache-Control", "max-age=60"}, {"cache-control", "private"}}),
            std::nullopt);
  // Directives that only look alike do not count.
  EXPECT_EQ(cache.lifetime(200, cache_control("no-storage, max-age=5")), Ttl(5s));
}

TEST(ResponseCacheLifetime, SMaxAgeTakesPrecedenceOverMaxAge) {
  ResponseCache cache(1 << 20, 30s);
  EXPECT_EQ(cache.lifetime(200, cache_control("max-age=60")), Ttl(60s));
  EXPECT_EQ(cache.lifetime(200, cache_control("s-maxage=10")), Ttl(10s));
  EXPECT_EQ(cache.lifetime(200, cache_control("max-age=60, s-maxage=10")), Ttl(10s));
  EXPECT_EQ(cache.lifetime(200, cache_control("s-maxage=10, max-age=60")), Ttl(10s));
  EXPECT_EQ(cache.lifetime(200, cache_control("S-MAXAGE=10, Max-Age=60")), Ttl(10s));
  // Across two fields, in either order.
  EXPECT_EQ(cache.lifetime(200, Headers{{"Cache-Control", "max-age=60"}, {"Cache-Control", "s-maxage=10"}}),
            Ttl(10s));
  EXPECT_EQ(cache.lifetime(200, Headers{{"Cache-Control", "s-maxage=10"}, {"Cache-Control", "max-age=60"}}),
            Ttl(10s));
  EXPECT_EQ(cache.lifetime(301, cache_control("public, max-age=3600")), Ttl(3600s));
}

TEST(ResponseCacheLifetime, ZeroMaxAgeIsNotCachedEvenWithADefault) {
  ResponseCache cache(1 << 20, 30s);
  EXPECT_EQ(cache.lifetime(200, cache_control("max-age=0")), std::nullopt);
  EXPECT_EQ(cache.lifetime(200, cache_control("s-maxage=0")), std::nullopt);
  EXPECT_EQ(cache.lifetime(200, cache_control("s-maxage=0, max-age=60")), std::nullopt);
  EXPECT_EQ(cache.lifetime(200, cache_control("max-age=60, s-maxage=0")), std::nullopt);
}

TEST(ResponseCacheLifetime, DefaultTtlAppliesWithoutMaxAge) {
  ResponseCache with_default(1 << 20, 30s);
  EXPECT_EQ(with_default.lifetime(200, {}), Ttl(30s));
  EXPECT_EQ(with_default.lifetime(200, cache_control("public")), Ttl(30s));
  EXPECT_EQ(with_default.lifetime(200, Headers{{"Content-Type", "text/html"}}), Ttl(30s));
  ResponseCache without(1 << 20, 0ms);
  EXPECT_EQ(without.lifetime(200, {}), std::nullopt);
  EXPECT_EQ(without.lifetime(200, cache_control("public")), std::nullopt);
  EXPECT_EQ(without.lifetime(200, cache_control("public, max-age=5")), Ttl(5s));
}

TEST(ResponseCacheLifetime, QuotedValuesAreRead) {
  ResponseCache cache(1 << 20, 0ms);
  EXPECT_EQ(cache.lifetime(200, cache_control("max-age=\"60\"")), Ttl(60s));
  EXPECT_EQ(cache.lifetime(200, cache_control("s-maxage=\"7\", max-age=60")), Ttl(7s));
}

TEST(ResponseCacheLifetime, MalformedValuesGiveNoLifetime) {
  ResponseCache cache(1 << 20, 0ms);
  for (std::string_view value :
       {"max-age=abc", "max-age=-1", "max-age=1.5", "max-age=", "max-age", "max-age=60x",
        "max-age=\"60", "max-age=\"\"", "max-age= 60", "max-age=+60"}) {
    EXPECT_EQ(cache.lifetime(200, cache_control(value)), std::nullopt) << value;
  }
}

// RFC 9111 section 1.2.2: a delta-seconds too large to represent is taken
// as 2^31 seconds (or the largest value at hand); it must not overflow.
// Regression: seconds -> milliseconds overflowed for the largest values, and
// values past int64 were dropped as malformed (RFC 9111 1.2.2: cap at 2^31).
TEST(ResponseCacheLifetime, HugeMaxAgeIsCappedRatherThanOverflowing) {
  ResponseCache cache(1 << 20, 0ms);
  for (std::string_view value :
       {"max-age=2147483648", "max-age=99999999999", "max-age=9223372036854775807",
        "s-maxage=18446744073709551616"}) {
    Ttl ttl = cache.lifetime(200, cache_control(value));
    EXPECT_TRUE(ttl.has_value()) << value;
    if (ttl) {
      EXPECT_GE(*ttl, std::chrono::seconds(2147483648LL)) << value;
    }
  }
}

TEST(ResponseCache, KeyIsHostSpaceTarget) {
  http::RequestParser parser;
  http::Request request;
  const std::string get = "GET /a/b.php?x=1&y=%20 HTTP/1.1\r\nHost: example.com:8080\r\n\r\n";
  ASSERT_EQ(parser.parse(get, &request), http::ParseStatus::kComplete);
  EXPECT_EQ(ResponseCache::key(request), "example.com:8080 /a/b.php?x=1&y=%20");
  // The method is not part of it: GET and HEAD share an entry.
  http::RequestParser head_parser;
  http::Request head;
  const std::string head_text = "HEAD /a/b.php?x=1&y=%20 HTTP/1.1\r\nHost: example.com:8080\r\n\r\n";
  ASSERT_EQ(head_parser.parse(head_text, &head), http::ParseStatus::kComplete);
  EXPECT_EQ(ResponseCache::key(head), ResponseCache::key(request));
  // Without a Host (HTTP/1.0) the key starts with the space.
  http::RequestParser old_parser;
  http::Request old;
  const std::string old_text = "GET /x HTTP/1.0\r\n\r\n";
  ASSERT_EQ(old_parser.parse(old_text, &old), http::ParseStatus::kComplete);
  EXPECT_EQ(ResponseCache::key(old), " /x");
}

TEST(ResponseCache, FindReturnsAFreshEntryUntilItExpires) {
  ResponseCache cache(1 << 20, 0ms);
  const auto t0 = Clock::now();
  auto e = entry(100, t0 + 10s);
  cache.insert("h /a", e);
  EXPECT_EQ(cache.entries(), 1u);
  EXPECT_EQ(cache.bytes(), e->bytes() + 4);
  EXPECT_EQ(cache.find("h /a", t0), e);
  EXPECT_EQ(cache.find("h /a", t0 + 9999ms), e);
  EXPECT_EQ(cache.find("h /b", t0), nullptr);
  // At its expiry time it is gone, and its bytes with it.
  EXPECT_EQ(cache.find("h /a", t0 + 10s), nullptr);
  EXPECT_EQ(cache.entries(), 0u);
  EXPECT_EQ(cache.bytes(), 0u);
  EXPECT_EQ(cache.find("h /a", t0), nullptr);
}

TEST(ResponseCache, AnEntryBeingServedSurvivesItsEviction) {
  ResponseCache cache(1 << 20, 0ms);
  const auto t0 = Clock::now();
  cache.insert("h /a", entry(10, t0 + 10s));
  auto held = cache.find("h /a", t0);
  ASSERT_NE(held, nullptr);
  cache.insert("h /a", entry(20, t0 + 10s));  // replaced
  EXPECT_EQ(held->body.size(), 10u);
  EXPECT_EQ(cache.find("h /a", t0)->body.size(), 20u);
}

TEST(ResponseCache, ReplacingAnEntryDoesNotCountItTwice) {
  ResponseCache cache(1 << 20, 0ms);
  const auto t0 = Clock::now();
  auto first = entry(100, t0 + 10s);
  auto second = entry(300, t0 + 10s);
  cache.insert("h /a", first);
  cache.insert("h /a", second);
  EXPECT_EQ(cache.entries(), 1u);
  EXPECT_EQ(cache.bytes(), second->bytes() + 4);
  EXPECT_EQ(cache.find("h /a", t0), second);
}

TEST(ResponseCache, EvictsTheLeastRecentlyUsedToStayWithinItsBytes) {
  const size_t budget = 64 * 1024;
  ResponseCache cache(budget, 0ms);
  const auto t0 = Clock::now();
  auto key = [](int i) { return "h /" + std::to_string(100 + i); };  // all the same length
  const size_t size = entry(3000, t0)->bytes() + key(0).size();
  const int fit = static_cast<int>(budget / size);
  ASSERT_GE(fit, 4);
  for (int i = 0; i < fit; ++i) cache.insert(key(i), entry(3000, t0 + 1h));
  EXPECT_EQ(cache.entries(), static_cast<size_t>(fit));
  EXPECT_EQ(cache.bytes(), fit * size);

  // Use the oldest: the second oldest is now the least recently used.
  ASSERT_NE(cache.find(key(0), t0), nullptr);
  cache.insert(key(fit), entry(3000, t0 + 1h));
  EXPECT_EQ(cache.entries(), static_cast<size_t>(fit));
  EXPECT_LE(cache.bytes(), budget);
  EXPECT_NE(cache.find(key(0), t0), nullptr);
  EXPECT_EQ(cache.find(key(1), t0), nullptr);
  EXPECT_NE(cache.find(key(2), t0), nullptr);
  EXPECT_NE(cache.find(key(fit), t0), nullptr);

  // A bigger entry pushes out as many of the oldest as it needs.
  const size_t big_body = cache.max_entry_bytes() - (entry(0, t0)->bytes() + key(0).size());
  cache.insert(key(fit + 1), entry(big_body, t0 + 1h));
  EXPECT_LE(cache.bytes(), budget);
  EXPECT_NE(cache.find(key(fit + 1), t0), nullptr);
  EXPECT_EQ(cache.find(key(3), t0), nullptr) << "the least recently used should have gone first";
  EXPECT_NE(cache.find(key(fit), t0), nullptr) << "a recent entry was evicted";
}

TEST(ResponseCache, EntriesOverAnEighthOfTheBudgetAreNotKept) {
  ResponseCache cache(64 * 1024, 0ms);
  ASSERT_EQ(cache.max_entry_bytes(), 8u * 1024);
  const auto t0 = Clock::now();
  const std::string key = "h /a";
  const size_t overhead = entry(0, t0)->bytes() + key.size();
  // Exactly at the limit: kept.
  cache.insert(key, entry(cache.max_entry_bytes() - overhead, t0 + 1h));
  EXPECT_EQ(cache.entries(), 1u);
  // One byte over: not kept (and the cache is left as it was).
  cache.insert("h /b", entry(cache.max_entry_bytes() - overhead + 1, t0 + 1h));
  EXPECT_EQ(cache.entries(), 1u);
  EXPECT_EQ(cache.find("h /b", t0), nullptr);
  EXPECT_EQ(cache.bytes(), cache.max_entry_bytes());
}

// The tap an upstream::Call feeds as a response streams past.
class ResponseCacheFiller : public ::testing::Test {
 protected:
  ResponseCache cache_{64 * 1024, 0ms};
};

TEST_F(ResponseCacheFiller, StoresACompleteCacheableResponse) {
  const auto before = Clock::now();
  auto tap = cache_.filler("h /page");
  const Headers headers = {{"Content-Type", "text/html"},
                           {"Cache-Control", "max-age=60"},
                           {"content-length", "11"},
                           {"X-Powered-By", "PHP"}};
  tap->on_head(200, headers);
  tap->on_body("hello ");
  tap->on_body("world");
  EXPECT_EQ(cache_.entries(), 0u) << "stored before the response was complete";
  tap->on_end(true);
  const auto after = Clock::now();
  auto hit = cache_.find("h /page", after);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->status, 200);
  EXPECT_EQ(hit->body, "hello world");
  // The writer adds its own Content-Length; the rest is kept in order.
  using Pair = std::pair<std::string, std::string>;
  EXPECT_EQ(hit->headers, (std::vector<Pair>{{"Content-Type", "text/html"},
                                             {"Cache-Control", "max-age=60"},
                                             {"X-Powered-By", "PHP"}}));
  EXPECT_GE(hit->stored, before);
  EXPECT_LE(hit->stored, after);
  EXPECT_EQ(hit->expires - hit->stored, 60s);
  EXPECT_EQ(cache_.find("h /page", hit->stored + 60s), nullptr);
}

TEST_F(ResponseCacheFiller, AnIncompleteResponseIsNotStored) {
  auto tap = cache_.filler("h /page");
  tap->on_head(200, cache_control("max-age=60"));
  tap->on_body("half");
  tap->on_end(false);
  EXPECT_EQ(cache_.entries(), 0u);
  // Nor one that never ends (the call went away).
  auto abandoned = cache_.filler("h /other");
  abandoned->on_head(200, cache_control("max-age=60"));
  abandoned->on_body("half");
  abandoned.reset();
  EXPECT_EQ(cache_.entries(), 0u);
}

TEST_F(ResponseCacheFiller, AnUncacheableResponseIsNotStored) {
  struct Case {
    int status;
    Headers headers;
  };
  const std::vector<Case> cases = {
      {404, cache_control("max-age=60")},
      {302, cache_control("max-age=60")},
      {200, {}},  // no lifetime: the default is 0
      {200, {{"Cache-Control", "max-age=60"}, {"Set-Cookie", "session=1"}}},
      {200, {{"Cache-Control", "max-age=60"}, {"Vary", "Cookie"}}},
      {200, cache_control("max-age=60, private")},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    auto tap = cache_.filler("h /" + std::to_string(i));
    tap->on_head(cases[i].status, cases[i].headers);
    tap->on_body("body");
    tap->on_end(true);
    EXPECT_EQ(cache_.entries(), 0u) << "case " << i;
  }
}

TEST_F(ResponseCacheFiller, ABodyOverTheEntryLimitIsNotStored) {
  auto tap = cache_.filler("h /big");
  tap->on_head(200, cache_control("max-age=60"));
  const std::string piece(1024, 'p');
  for (size_t sent = 0; sent <= cache_.max_entry_bytes(); sent += piece.size()) tap->on_body(piece);
  tap->on_end(true);
  EXPECT_EQ(cache_.entries(), 0u);
  EXPECT_EQ(cache_.bytes(), 0u);
}

TEST_F(ResponseCacheFiller, UsesTheDefaultTtlWithoutMaxAge) {
  ResponseCache cache(64 * 1024, 5s);
  auto tap = cache.filler("h /page");
  tap->on_head(301, Headers{{"Location", "/elsewhere"}});
  tap->on_end(true);
  auto hit = cache.find("h /page", Clock::now());
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->status, 301);
  EXPECT_EQ(hit->body, "");
  EXPECT_EQ(hit->expires - hit->stored, 5s);
}

// Regression: stored + ttl overflowed the clock's nanosecond count past some
// 292 years, so the entry expired at once (and UBSan saw the overflow).
TEST_F(ResponseCacheFiller, AHugeMaxAgeKeepsTheEntry) {
  auto tap = cache_.filler("h /forever");
  tap->on_head(200, cache_control("max-age=9999999999"));  // some 317 years
  tap->on_body("x");
  tap->on_end(true);
  auto hit = cache_.find("h /forever", Clock::now());
  ASSERT_NE(hit, nullptr) << "expired at once: the expiry time overflowed";
  EXPECT_GT(hit->expires, hit->stored + 24h * 365 * 10);
}

}  // namespace
}  // namespace tern::server
