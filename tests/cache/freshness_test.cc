#include "cache/freshness.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <ctime>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "http/http_date.h"

namespace tern::cache {
namespace {

using std::chrono::seconds;

constexpr time_t kNow = 1'700'000'000;  // 2023-11-14 22:13:20 UTC

// Owns the dates it formats, so the fields' views stay valid for the test.
class Response {
 public:
  Response(std::initializer_list<std::pair<std::string, std::string>> fields) {
    for (const auto& [name, value] : fields) add(name, value);
  }
  Response& add(std::string name, std::string value) {
    owned_.emplace_back(std::move(name), std::move(value));
    return *this;
  }
  static std::string date(time_t t) {
    std::array<char, http::kHttpDateSize> out;
    return std::string(http::format_http_date(t, out));
  }
  std::vector<http::Header> headers() const {
    std::vector<http::Header> out;
    for (const auto& [name, value] : owned_) {
      http::Header h;
      h.name = name;
      h.value = value;
      out.push_back(h);
    }
    return out;
  }

 private:
  std::vector<std::pair<std::string, std::string>> owned_;
};

Freshness decide_for(int status, const Response& response, const Policy& policy = {}, bool authorized = false,
                     time_t now = kNow) {
  const std::vector<http::Header> headers = response.headers();
  return decide(status, headers, authorized, policy, now);
}

Policy valid(std::initializer_list<std::pair<int, std::chrono::seconds>> v) {
  Policy p;
  p.valid = v;
  return p;
}

TEST(Freshness, DirectiveReadsBareQuotedAndAnyCase) {
  EXPECT_EQ(directive("no-store", "no-store"), "");
  EXPECT_EQ(directive("public, max-age=60", "max-age"), "60");
  EXPECT_EQ(directive("Public, MAX-AGE=\"60\"", "max-age"), "60");
  EXPECT_EQ(directive(" max-age = 60 ,", "max-age"), "60");
  EXPECT_EQ(directive("max-age=60, max-age=10", "max-age"), "60");  // the first wins
  EXPECT_EQ(directive("max-age=60", "s-maxage"), std::nullopt);
  EXPECT_EQ(directive("", "max-age"), std::nullopt);
  EXPECT_EQ(directive(",,", "max-age"), std::nullopt);
}

TEST(Freshness, DirectiveDoesNotSplitInsideQuotes) {
  EXPECT_EQ(directive("private=\"Set-Cookie, X-Foo\", max-age=5", "private"), "Set-Cookie, X-Foo");
  EXPECT_EQ(directive("private=\"Set-Cookie, X-Foo\", max-age=5", "max-age"), "5");
  EXPECT_EQ(directive("no-cache=\"a, max-age=9\"", "max-age"), std::nullopt);
  EXPECT_EQ(directive("x=\"q\\\", max-age=9\", max-age=3", "max-age"), "3");  // an escaped quote
}

TEST(Freshness, MaxAgeGivesTheLifetime) {
  Freshness f = decide_for(200, {{"Cache-Control", "max-age=60"}});
  EXPECT_TRUE(f.store);
  EXPECT_EQ(f.why, "");
  EXPECT_EQ(f.lifetime, seconds(60));
  EXPECT_FALSE(f.revalidate);
  EXPECT_FALSE(f.no_stale);
  EXPECT_FALSE(f.drop_set_cookie);
}

TEST(Freshness, SeveralCacheControlFieldsAreOneList) {
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "public"}, {"Cache-Control", "max-age=60"}}).lifetime, seconds(60));
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "max-age=60"}, {"Cache-Control", "no-store"}}).why, "no-store");
  // The first max-age wins across fields too.
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "max-age=60"}, {"Cache-Control", "max-age=5"}}).lifetime,
            seconds(60));
}

TEST(Freshness, NamesAreCaseInsensitiveAndValuesMayBeQuoted) {
  EXPECT_EQ(decide_for(200, {{"cache-control", "MAX-AGE=\"90\""}}).lifetime, seconds(90));
  EXPECT_EQ(decide_for(200, {{"CACHE-CONTROL", "No-Store"}}).why, "no-store");
}

TEST(Freshness, MalformedMaxAgeIsStale) {
  for (const char* cc : {"max-age=abc", "max-age=-1", "max-age=1.5", "max-age", "max-age=", "s-maxage=x, max-age=60"}) {
    SCOPED_TRACE(cc);
    EXPECT_EQ(decide_for(200, {{"Cache-Control", cc}}).why, "stale without validator");
    Freshness f = decide_for(200, {{"Cache-Control", cc}, {"ETag", "\"v1\""}});
    EXPECT_TRUE(f.store);
    EXPECT_EQ(f.lifetime, seconds(0));
  }
  // Explicit, even when malformed: the policy's default does not replace it.
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "max-age=x"}}, valid({{200, seconds(600)}})).why,
            "stale without validator");
}

TEST(Freshness, OverflowingNumbersCapAt2To31) {
  constexpr seconds kCap(int64_t{1} << 31);
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "max-age=99999999999999999999999999"}}).lifetime, kCap);
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "max-age=2147483649"}}).lifetime, kCap);
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "max-age=2147483647"}}).lifetime, kCap - seconds(1));
  EXPECT_EQ(decide_for(200, {{"Expires", Response::date(kNow + 10LL * 365 * 86400 * 10)}}).lifetime, kCap);
}

TEST(Freshness, SMaxAgeBeatsMaxAgeAndForbidsStale) {
  Freshness f = decide_for(200, {{"Cache-Control", "max-age=10, s-maxage=300, stale-if-error=60"}});
  EXPECT_TRUE(f.store);
  EXPECT_EQ(f.lifetime, seconds(300));
  EXPECT_TRUE(f.no_stale);
  EXPECT_EQ(f.stale_if_error, seconds(0));
}

TEST(Freshness, ExpiresCountsFromDate) {
  // Our clock is 1000 s ahead of the origin's: Expires - Date is still 120.
  Freshness f = decide_for(200, {{"Date", Response::date(kNow - 1000)}, {"Expires", Response::date(kNow - 880)}});
  EXPECT_TRUE(f.store);
  EXPECT_EQ(f.lifetime, seconds(120));
  // Expires before Date: expired.
  EXPECT_EQ(decide_for(200, {{"Date", Response::date(kNow)}, {"Expires", Response::date(kNow - 5)}}).why,
            "stale without validator");
}

TEST(Freshness, ExpiresWithoutDateCountsFromNow) {
  EXPECT_EQ(decide_for(200, {{"Expires", Response::date(kNow + 300)}}).lifetime, seconds(300));
  // An unreadable Date counts as absent.
  EXPECT_EQ(decide_for(200, {{"Date", "yesterday"}, {"Expires", Response::date(kNow + 300)}}).lifetime,
            seconds(300));
}

TEST(Freshness, InvalidExpiresIsAlreadyExpired) {
  for (const char* expires : {"0", "-1", "never", ""}) {
    SCOPED_TRACE(expires);
    EXPECT_EQ(decide_for(200, {{"Expires", expires}}, valid({{200, seconds(600)}})).why, "stale without validator");
    Freshness f = decide_for(200, {{"Expires", expires}, {"Last-Modified", Response::date(kNow - 86400)}});
    EXPECT_TRUE(f.store);
    EXPECT_EQ(f.lifetime, seconds(0));
  }
}

TEST(Freshness, MaxAgeBeatsExpires) {
  EXPECT_EQ(decide_for(200, {{"Expires", "0"}, {"Cache-Control", "max-age=60"}}).lifetime, seconds(60));
}

TEST(Freshness, AgeIsTakenOff) {
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "max-age=60"}, {"Age", "15"}}).lifetime, seconds(45));
  EXPECT_EQ(decide_for(200, {{"Expires", Response::date(kNow + 60)}, {"Age", "15"}}).lifetime, seconds(45));
  EXPECT_EQ(decide_for(200, {{"Age", "15"}}, valid({{200, seconds(60)}})).lifetime, seconds(45));
  // Invalid Age is ignored.
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "max-age=60"}, {"Age", "abc"}}).lifetime, seconds(60));
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "max-age=60"}, {"Age", "-5"}}).lifetime, seconds(60));
  // Older than its lifetime: stale, floor 0, kept only to revalidate.
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "max-age=60"}, {"Age", "100"}}).why, "stale without validator");
  Freshness f = decide_for(200, {{"Cache-Control", "max-age=60"}, {"Age", "100"}, {"ETag", "\"x\""}});
  EXPECT_TRUE(f.store);
  EXPECT_EQ(f.lifetime, seconds(0));
}

TEST(Freshness, XAccelExpiresSecondsComesFirst) {
  Freshness f = decide_for(200, {{"X-Accel-Expires", "600"},
                                 {"Cache-Control", "max-age=5"},
                                 {"Expires", Response::date(kNow + 5)}});
  EXPECT_TRUE(f.store);
  EXPECT_EQ(f.lifetime, seconds(600));
  EXPECT_EQ(decide_for(200, {{"X-Accel-Expires", "600"}, {"Age", "100"}}).lifetime, seconds(500));
}

TEST(Freshness, XAccelExpiresAtIsADeadline) {
  EXPECT_EQ(decide_for(200, {{"X-Accel-Expires", "@" + std::to_string(kNow + 90)}}).lifetime, seconds(90));
  // Age is not taken off an absolute time.
  EXPECT_EQ(decide_for(200, {{"X-Accel-Expires", "@" + std::to_string(kNow + 90)}, {"Age", "30"}}).lifetime,
            seconds(90));
  // A deadline already past: stale on arrival.
  EXPECT_EQ(decide_for(200, {{"X-Accel-Expires", "@" + std::to_string(kNow - 1)}}).why, "stale without validator");
  EXPECT_EQ(decide_for(200, {{"X-Accel-Expires", "@" + std::to_string(kNow - 1)}, {"ETag", "\"e\""}}).lifetime,
            seconds(0));
}

TEST(Freshness, XAccelExpiresZeroMeansDoNotStore) {
  EXPECT_EQ(decide_for(200, {{"X-Accel-Expires", "0"}, {"Cache-Control", "max-age=60"}}).why, "x-accel-expires");
  EXPECT_EQ(decide_for(200, {{"X-Accel-Expires", "0"}}, valid({{0, seconds(60)}})).why, "x-accel-expires");
}

TEST(Freshness, MalformedXAccelExpiresIsIgnored) {
  for (const char* value : {"soon", "-5", "@", "@x", "", "1.5"}) {
    SCOPED_TRACE(value);
    EXPECT_EQ(decide_for(200, {{"X-Accel-Expires", value}, {"Cache-Control", "max-age=60"}}).lifetime, seconds(60));
  }
  EXPECT_EQ(decide_for(200, {{"X-Accel-Expires", "soon"}, {"Cache-Control", "no-store"}}).why, "no-store");
}

TEST(Freshness, XAccelExpiresSupersedesCacheControl) {
  for (const char* cc : {"no-store", "private", "no-cache", "max-age=0"}) {
    SCOPED_TRACE(cc);
    Freshness f = decide_for(200, {{"X-Accel-Expires", "60"}, {"Cache-Control", cc}});
    EXPECT_TRUE(f.store);
    EXPECT_EQ(f.lifetime, seconds(60));
    EXPECT_FALSE(f.revalidate);
  }
  // But neither the Authorization rule nor the status rule.
  EXPECT_EQ(decide_for(200, {{"X-Accel-Expires", "60"}}, {}, true).why, "authorization");
  EXPECT_TRUE(decide_for(200, {{"X-Accel-Expires", "60"}, {"Cache-Control", "public"}}, {}, true).store);
  EXPECT_EQ(decide_for(500, {{"X-Accel-Expires", "60"}}).why, "status");
}

TEST(Freshness, NoStoreIsNotStored) {
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "no-store, max-age=60"}}, valid({{0, seconds(60)}})).why, "no-store");
}

TEST(Freshness, PrivateIsNotStoredBySharedCache) {
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "private, max-age=60"}}).why, "private");
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "private=\"Set-Cookie\", max-age=60"}}).why, "private");
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "max-age=60, private=\"X-A, X-B\""}}).why, "private");
}

TEST(Freshness, VaryStarIsNotStoredOtherVaryIs) {
  EXPECT_EQ(decide_for(200, {{"Vary", "*"}, {"Cache-Control", "max-age=60"}}).why, "vary *");
  EXPECT_EQ(decide_for(200, {{"Vary", "Accept, *"}, {"Cache-Control", "max-age=60"}}).why, "vary *");
  EXPECT_EQ(decide_for(200, {{"Vary", "Accept-Encoding"}, {"Vary", "*"}, {"Cache-Control", "max-age=60"}}).why,
            "vary *");
  Freshness f = decide_for(200, {{"Vary", "Accept-Encoding"}, {"Cache-Control", "max-age=60"}});
  EXPECT_TRUE(f.store);
  EXPECT_EQ(f.lifetime, seconds(60));
}

TEST(Freshness, SetCookieFollowsThePolicy) {
  const Response r = {{"Set-Cookie", "a=b"}, {"Cache-Control", "max-age=60"}};
  EXPECT_EQ(decide_for(200, r).why, "set-cookie");
  Policy p;
  p.store_set_cookie = true;
  Freshness f = decide_for(200, r, p);
  EXPECT_TRUE(f.store);
  EXPECT_TRUE(f.drop_set_cookie);
  EXPECT_EQ(f.lifetime, seconds(60));
  // Without Set-Cookie there is nothing to drop.
  EXPECT_FALSE(decide_for(200, {{"Cache-Control", "max-age=60"}}, p).drop_set_cookie);
}

TEST(Freshness, AuthorizationNeedsExplicitPermission) {
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "max-age=60"}}, {}, true).why, "authorization");
  EXPECT_EQ(decide_for(200, {}, valid({{200, seconds(60)}}), true).why, "authorization");
  for (const char* cc : {"public, max-age=60", "s-maxage=60", "must-revalidate, max-age=60"}) {
    SCOPED_TRACE(cc);
    Freshness f = decide_for(200, {{"Cache-Control", cc}}, {}, true);
    EXPECT_TRUE(f.store);
    EXPECT_EQ(f.lifetime, seconds(60));
  }
  // proxy-revalidate is not one of the three.
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "proxy-revalidate, max-age=60"}}, {}, true).why, "authorization");
}

TEST(Freshness, PartialAndInterimResponsesAreNeverStored) {
  const Policy any = valid({{0, seconds(60)}, {206, seconds(60)}});
  for (int status : {100, 101, 103, 206, 304, 0, 600, -1}) {
    SCOPED_TRACE(status);
    EXPECT_EQ(decide_for(status, {{"Cache-Control", "max-age=60"}}, any).why, "status");
  }
}

TEST(Freshness, OtherStatusesNeedThePolicy) {
  EXPECT_EQ(decide_for(500, {{"Cache-Control", "max-age=60"}}).why, "status");
  EXPECT_EQ(decide_for(500, {}, valid({{200, seconds(60)}})).why, "status");
  Freshness any = decide_for(500, {}, valid({{0, seconds(30)}}));
  EXPECT_TRUE(any.store);
  EXPECT_EQ(any.lifetime, seconds(30));
  // Named: its own lifetime beats any's; an explicit one beats both.
  const Policy p = valid({{0, seconds(30)}, {500, seconds(5)}});
  EXPECT_EQ(decide_for(500, {}, p).lifetime, seconds(5));
  EXPECT_EQ(decide_for(500, {{"Cache-Control", "max-age=60"}}, p).lifetime, seconds(60));
  // A lifetime of 0 keeps a status out even when any lets the others in.
  EXPECT_EQ(decide_for(500, {}, valid({{0, seconds(30)}, {500, seconds(0)}})).why, "no lifetime");
}

TEST(Freshness, DefaultCacheableStatusesNeedOnlyALifetime) {
  for (int status : {200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501}) {
    SCOPED_TRACE(status);
    EXPECT_EQ(decide_for(status, {{"Cache-Control", "max-age=60"}}).lifetime, seconds(60));
  }
}

TEST(Freshness, TemporaryRedirectsNeedExplicitFreshness) {
  for (int status : {302, 303, 307}) {
    SCOPED_TRACE(status);
    EXPECT_TRUE(decide_for(status, {{"Cache-Control", "max-age=60"}}).store);
    EXPECT_TRUE(decide_for(status, {{"Expires", Response::date(kNow + 60)}}).store);
    EXPECT_EQ(decide_for(status, {}, valid({{200, seconds(60)}})).why, "status");
    EXPECT_TRUE(decide_for(status, {}, valid({{status, seconds(60)}})).store);
  }
}

TEST(Freshness, NoLifetimeIsNotStored) {
  EXPECT_EQ(decide_for(200, {}).why, "no lifetime");
  EXPECT_EQ(decide_for(200, {{"ETag", "\"v\""}}).why, "no lifetime");
  EXPECT_EQ(decide_for(404, {}, valid({{200, seconds(60)}})).why, "no lifetime");
  Freshness f = decide_for(404, {}, valid({{200, seconds(600)}, {404, seconds(60)}}));
  EXPECT_EQ(f.lifetime, seconds(60));
}

TEST(Freshness, PublicAloneGivesNoLifetime) {
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "public"}}).why, "no lifetime");
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "public"}}, valid({{200, seconds(60)}})).lifetime, seconds(60));
}

TEST(Freshness, NoCacheIsStoredOnlyToRevalidate) {
  for (const char* cc : {"no-cache", "no-cache, max-age=600", "No-Cache=\"Set-Cookie\", max-age=600"}) {
    SCOPED_TRACE(cc);
    EXPECT_EQ(decide_for(200, {{"Cache-Control", cc}}).why, "no-cache without validator");
    Freshness f = decide_for(200, {{"Cache-Control", cc}, {"ETag", "\"v1\""}}, valid({{200, seconds(60)}}));
    EXPECT_TRUE(f.store);
    EXPECT_TRUE(f.revalidate);
    EXPECT_EQ(f.lifetime, seconds(0));
  }
  EXPECT_TRUE(decide_for(200, {{"Cache-Control", "no-cache"}, {"Last-Modified", Response::date(kNow)}},
                         valid({{200, seconds(60)}}))
                  .revalidate);
  // no-cache needs no lifetime from anywhere, but a status that needs an
  // explicit one still does.
  EXPECT_TRUE(decide_for(200, {{"Cache-Control", "no-cache"}, {"ETag", "\"v1\""}}).revalidate);
  EXPECT_EQ(decide_for(302, {{"Cache-Control", "no-cache"}, {"ETag", "\"v1\""}}).why, "status");
  EXPECT_EQ(decide_for(500, {{"Cache-Control", "no-cache"}, {"ETag", "\"v1\""}}).why, "status");
  // A policy lifetime of 0 still keeps the status out.
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "no-cache"}, {"ETag", "\"v1\""}}, valid({{200, seconds(0)}})).why,
            "no lifetime");
}

TEST(Freshness, ZeroLifetimeIsStoredOnlyWithAValidator) {
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "max-age=0"}}).why, "stale without validator");
  Freshness f = decide_for(200, {{"Cache-Control", "max-age=0, stale-while-revalidate=30"}, {"ETag", "\"v\""}});
  EXPECT_TRUE(f.store);
  EXPECT_EQ(f.lifetime, seconds(0));
  EXPECT_FALSE(f.revalidate);
  EXPECT_EQ(f.stale_while_revalidate, seconds(30));
}

TEST(Freshness, StaleDirectivesAreRead) {
  Freshness f = decide_for(200, {{"Cache-Control", "max-age=60, stale-while-revalidate=30"},
                                 {"Cache-Control", "Stale-If-Error=\"86400\""}});
  EXPECT_TRUE(f.store);
  EXPECT_EQ(f.stale_while_revalidate, seconds(30));
  EXPECT_EQ(f.stale_if_error, seconds(86400));
  EXPECT_FALSE(f.no_stale);

  f = decide_for(200, {{"Cache-Control", "max-age=60, stale-while-revalidate=soon, stale-if-error"}});
  EXPECT_TRUE(f.store);
  EXPECT_EQ(f.stale_while_revalidate, seconds(0));
  EXPECT_EQ(f.stale_if_error, seconds(0));

  // Read with X-Accel-Expires too, as nginx does.
  f = decide_for(200, {{"X-Accel-Expires", "60"}, {"Cache-Control", "no-store, stale-if-error=10"}});
  EXPECT_EQ(f.stale_if_error, seconds(10));
}

TEST(Freshness, RevalidateDirectivesForbidStale) {
  for (const char* cc : {"must-revalidate", "proxy-revalidate", "s-maxage=60"}) {
    SCOPED_TRACE(cc);
    Freshness f = decide_for(
        200, {{"Cache-Control", std::string("max-age=60, stale-while-revalidate=30, stale-if-error=30, ") + cc}});
    EXPECT_TRUE(f.store);
    EXPECT_TRUE(f.no_stale);
    EXPECT_EQ(f.stale_while_revalidate, seconds(0));
    EXPECT_EQ(f.stale_if_error, seconds(0));
  }
  // no-cache forbids stale use as well (RFC 9111 4.2.4).
  Freshness f =
      decide_for(200, {{"Cache-Control", "no-cache, max-age=60, stale-if-error=30"}, {"ETag", "\"v\""}});
  EXPECT_TRUE(f.revalidate);
  EXPECT_EQ(f.stale_if_error, seconds(0));
}

TEST(Freshness, ReasonsComeInAFixedOrder) {
  EXPECT_EQ(decide_for(206, {{"Vary", "*"}, {"Set-Cookie", "a=b"}}).why, "status");
  EXPECT_EQ(decide_for(200, {{"Vary", "*"}, {"Set-Cookie", "a=b"}}).why, "vary *");
  EXPECT_EQ(decide_for(200, {{"Set-Cookie", "a=b"}, {"Cache-Control", "no-store"}}).why, "set-cookie");
  EXPECT_EQ(decide_for(200, {{"Cache-Control", "private, no-store"}}).why, "no-store");
}

}  // namespace
}  // namespace tern::cache
