// Signed session cookies and the login rate limiter.
#include <sodium.h>

#include <gtest/gtest.h>

#include "auth/login_throttle.h"
#include "auth/rate_limiter.h"
#include "auth/session_signer.h"

namespace tern::auth {
namespace {

class SessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_GE(sodium_init(), 0); }
  SessionSigner signer_{"a secret of at least thirty-two characters", std::chrono::seconds(3600)};
};

std::optional<std::string> name_of(const std::optional<SessionSigner::Session>& session) {
  if (!session) return std::nullopt;
  return session->username;
}

TEST_F(SessionTest, SignedValueVerifiesToTheUsernameAndGeneration) {
  std::string value = signer_.sign("alice", 7, 1000);
  auto session = signer_.verify(value, 1000);
  ASSERT_TRUE(session);
  EXPECT_EQ(session->username, "alice");
  EXPECT_EQ(session->generation, 7u);
  EXPECT_EQ(name_of(signer_.verify(value, 1000 + 3599)), "alice");
}

TEST_F(SessionTest, TheGenerationIsSignedToo) {
  // A cookie from before a logout cannot be edited to the new generation.
  std::string value = signer_.sign("alice", 1, 1000);
  std::string bumped = value;
  bumped.replace(bumped.find(".1.") + 1, 1, "2");
  EXPECT_FALSE(signer_.verify(bumped, 1000));
}

TEST_F(SessionTest, ExpiresAfterTheTtl) {
  std::string value = signer_.sign("alice", 0, 1000);
  EXPECT_FALSE(signer_.verify(value, 1000 + 3600));
}

TEST_F(SessionTest, AnotherSecretRejectsIt) {
  SessionSigner other("another secret of at least thirty-two chars", std::chrono::seconds(3600));
  EXPECT_FALSE(other.verify(signer_.sign("alice", 0, 1000), 1000));
  SessionSigner same("a secret of at least thirty-two characters", std::chrono::seconds(60));
  EXPECT_EQ(name_of(same.verify(signer_.sign("alice", 0, 1000), 1000)), "alice");  // any node, same secret
}

TEST_F(SessionTest, EveryTamperedByteIsRejected) {
  const std::string value = signer_.sign("alice", 0, 1000);
  for (size_t i = 0; i < value.size(); ++i) {
    std::string tampered = value;
    tampered[i] = tampered[i] == 'A' ? 'B' : 'A';
    EXPECT_FALSE(signer_.verify(tampered, 1000)) << "byte " << i << ": " << tampered;
  }
  // A longer expiry with the old MAC.
  std::string later = value;
  later.replace(later.rfind('.') - 4, 4, "9999");
  EXPECT_FALSE(signer_.verify(later, 1000));
}

TEST_F(SessionTest, MalformedValuesAreRejected) {
  for (std::string_view bad : {"", ".", "..", "a.b.c", "YWxpY2U.1000.", "YWxpY2U..xx", "no-dots-at-all",
                               "YWxpY2U.0.1000.", "YWxpY2U.-1.1000.xx"}) {
    EXPECT_FALSE(signer_.verify(bad, 1000)) << bad;
  }
}

TEST_F(SessionTest, UsernamesWithDotsAndOddBytesRoundTrip) {
  using namespace std::string_view_literals;
  for (std::string_view name : {"a.b.c"sv, "x' OR '1'='1"sv, "日本"sv, "\0x"sv}) {
    EXPECT_EQ(name_of(signer_.verify(signer_.sign(name, 3, 5), 5)), std::string(name));
  }
}

TEST(SessionCookie, FindsOurCookieAmongOthers) {
  EXPECT_EQ(SessionSigner::find_cookie("tern_session=abc"), "abc");
  EXPECT_EQ(SessionSigner::find_cookie("a=1; tern_session=abc; b=2"), "abc");
  EXPECT_EQ(SessionSigner::find_cookie("a=1;tern_session=abc"), "abc");
  EXPECT_EQ(SessionSigner::find_cookie("tern_sessionx=abc; a=1"), "");
  EXPECT_EQ(SessionSigner::find_cookie("xtern_session=abc"), "");
  EXPECT_EQ(SessionSigner::find_cookie(""), "");
}

TEST(AddressKey, Ipv4IsTheAddressAndIpv6ItsSlash64) {
  auto key = [](const char* text) { return address_key(*net::InetAddress::parse(text)); };
  EXPECT_EQ(key("203.0.113.7:5000"), "203.0.113.7");
  EXPECT_EQ(key("[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:5000"), "2001:db8:1:2::/64");
  EXPECT_EQ(key("[2001:db8:1:2::1]:1"), key("[2001:db8:1:2:ffff::9]:2"));
  EXPECT_NE(key("[2001:db8:1:2::1]:1"), key("[2001:db8:1:3::1]:1"));
  EXPECT_EQ(key("[::ffff:203.0.113.7]:80"), "::ffff:203.0.113.7");
}

TEST(LoginThrottle, BacksOffAfterTheFreeFailuresAndDoubles) {
  LoginThrottle throttle(3, std::chrono::seconds(30), std::chrono::seconds(100));
  int64_t retry = 0;
  for (int i = 0; i < 2; ++i) throttle.failed("Alice", 1000);
  EXPECT_TRUE(throttle.allow("alice", 1000, &retry));
  throttle.failed("ALICE", 1000);  // the third: 30 s
  EXPECT_FALSE(throttle.allow("alice", 1000, &retry));
  EXPECT_EQ(retry, 30);
  EXPECT_TRUE(throttle.allow("bob", 1000, &retry)) << "another account is not affected";
  EXPECT_TRUE(throttle.allow("alice", 1030, &retry));
  throttle.failed("alice", 1030);  // the fourth: 60 s
  EXPECT_FALSE(throttle.allow("alice", 1089, &retry));
  EXPECT_EQ(retry, 1);
  throttle.failed("alice", 1090);  // the fifth: 120 s, capped at 100
  EXPECT_FALSE(throttle.allow("alice", 1189, &retry));
  EXPECT_TRUE(throttle.allow("alice", 1190, &retry));
  throttle.succeeded("Alice");
  throttle.failed("alice", 1200);
  EXPECT_TRUE(throttle.allow("alice", 1200, &retry)) << "a success starts the count again";
}

TEST(LoginThrottle, StaysBoundedUnderManyAccounts) {
  LoginThrottle throttle(1, std::chrono::seconds(10), std::chrono::seconds(10), 100);
  int64_t retry = 0;
  for (int i = 0; i < 1000; ++i) throttle.failed("user" + std::to_string(i), 1000);
  EXPECT_FALSE(throttle.allow("user5", 1000, &retry));
  // Past max_backoff the old entries make room for new ones.
  throttle.failed("late", 2000);
  EXPECT_FALSE(throttle.allow("late", 2000, &retry));
}

TEST(RateLimiter, AllowsTheLimitInAnyWindowThenRefuses) {
  RateLimiter limiter(3, std::chrono::seconds(60));
  int64_t retry = 0;
  EXPECT_TRUE(limiter.allow("10.0.0.1", 150, &retry));
  EXPECT_TRUE(limiter.allow("10.0.0.1", 170, &retry));
  EXPECT_TRUE(limiter.allow("10.0.0.1", 175, &retry));
  // Across a minute's boundary the window still holds all three (fixed
  // windows would have let 3 more through at 180).
  EXPECT_FALSE(limiter.allow("10.0.0.1", 180, &retry));
  EXPECT_EQ(retry, 30);  // the event at 150 leaves the window at 210
  EXPECT_TRUE(limiter.allow("10.0.0.2", 180, &retry)) << "addresses are counted apart";
  EXPECT_FALSE(limiter.allow("10.0.0.1", 209, &retry));
  EXPECT_EQ(retry, 1);
  EXPECT_TRUE(limiter.allow("10.0.0.1", 210, &retry));
  EXPECT_FALSE(limiter.allow("10.0.0.1", 211, &retry));
  EXPECT_EQ(retry, 19);  // then the one at 170, at 230
}

TEST(RateLimiter, StaysBoundedUnderManyAddresses) {
  RateLimiter limiter(1, std::chrono::seconds(60), /*max_addresses=*/4);
  int64_t retry = 0;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(limiter.allow("a" + std::to_string(i), 0, &retry));
  // The table is full of entries in the window: newcomers share one entry.
  EXPECT_TRUE(limiter.allow("b0", 0, &retry));
  EXPECT_FALSE(limiter.allow("b1", 0, &retry));
  // A window later: the old entries are swept, newcomers get their own again.
  EXPECT_TRUE(limiter.allow("c0", 60, &retry));
  EXPECT_TRUE(limiter.allow("c1", 60, &retry));
}

}  // namespace
}  // namespace tern::auth
