#include "base/result.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

namespace tern {
namespace {

Result<int> parse_digit(char c) {
  if (c < '0' || c > '9') return Error{EINVAL, "parse digit"};
  return c - '0';
}

Result<void> check_positive(int v) {
  if (v <= 0) return Error{ERANGE, "check positive"};
  return {};
}

TEST(Error, MessageJoinsOperationAndStrerror) {
  Error e{ECONNREFUSED, "connect"};
  EXPECT_EQ(e.message(), std::string("connect: ") + std::strerror(ECONNREFUSED));
}

TEST(Error, MessageWithoutCodeIsJustTheOperation) {
  EXPECT_EQ((Error{0, "accept"}).message(), "accept");
  EXPECT_EQ(Error{}.message(), "");
}

TEST(Error, EqualityComparesCodeAndOperation) {
  // The defaulted operator== compares `what` as a pointer, so use one pointer
  // rather than relying on the compiler merging equal string literals.
  const char* bind = "bind";
  const char* listen = "listen";
  EXPECT_EQ((Error{EINVAL, bind}), (Error{EINVAL, bind}));
  EXPECT_NE((Error{EINVAL, bind}), (Error{EAGAIN, bind}));
  EXPECT_NE((Error{EINVAL, bind}), (Error{EINVAL, listen}));
}

TEST(Error, ErrnoErrorKeepsCodeAndOperation) {
  Error e = errno_error("listen", EADDRINUSE);
  EXPECT_EQ(e.code, EADDRINUSE);
  EXPECT_STREQ(e.what, "listen");
}

TEST(Result, ValueResultIsOkAndHoldsTheValue) {
  Result<int> r = parse_digit('7');
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(r.value(), 7);
  EXPECT_EQ(*r, 7);
  EXPECT_EQ(r.value_or(-1), 7);
}

TEST(Result, ErrorResultIsNotOkAndHoldsTheError) {
  Result<int> r = parse_digit('x');
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.error().code, EINVAL);
  EXPECT_STREQ(r.error().what, "parse digit");
  EXPECT_EQ(r.value_or(-1), -1);
}

TEST(Result, ValueCanBeModifiedThroughReference) {
  Result<std::string> r = std::string("abc");
  r.value() += "def";
  r->append("!");
  EXPECT_EQ(*r, "abcdef!");
  EXPECT_EQ(r->size(), 7u);
}

TEST(Result, ConstAccessorsReturnTheValue) {
  const Result<std::string> r = std::string("hello");
  EXPECT_EQ(r.value(), "hello");
  EXPECT_EQ(*r, "hello");
  EXPECT_EQ(r->size(), 5u);
  EXPECT_EQ(r.value_or("x"), "hello");
}

TEST(Result, RvalueValueMovesOutMoveOnlyType) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(42);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 42);
}

TEST(Result, ValueTypeMayItselfBeConvertibleFromError) {
  // A Result<Error> would be ambiguous; a Result<std::string> is not, and
  // an Error stays an error even though std::string is constructible from
  // many things.
  Result<std::string> r = Error{ENOENT, "open"};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ENOENT);
}

TEST(Result, CopiesAreIndependent) {
  Result<std::string> a = std::string("one");
  Result<std::string> b = a;
  b.value() = "two";
  EXPECT_EQ(*a, "one");
  EXPECT_EQ(*b, "two");
}

TEST(ResultVoid, DefaultIsOk) {
  Result<void> r = check_positive(3);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(static_cast<bool>(r));
}

TEST(ResultVoid, ErrorIsNotOkAndCarriesTheError) {
  Result<void> r = check_positive(0);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.error().code, ERANGE);
  EXPECT_STREQ(r.error().what, "check positive");
  EXPECT_EQ(r.error().message(), std::string("check positive: ") + std::strerror(ERANGE));
}

using ResultDeathTest = ::testing::Test;

TEST_F(ResultDeathTest, ValueOnErrorAbortsWithTheErrorMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Result<int> r = Error{ECONNREFUSED, "connect"};
  EXPECT_DEATH((void)r.value(), "Result::value\\(\\) on an error: connect: ");
}

TEST_F(ResultDeathTest, ErrorOnValueAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Result<int> r = 1;
  EXPECT_DEATH((void)r.error(), "check failed");
}

TEST_F(ResultDeathTest, ErrorOnOkVoidResultAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Result<void> r;
  EXPECT_DEATH((void)r.error(), "check failed");
}

}  // namespace
}  // namespace tern
