#include "http/uri.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace tern::http {
namespace {

// The normalised path, or "ERROR".
std::string normalized(std::string_view encoded) {
  std::string out;
  if (!normalize_path(encoded, &out)) return "ERROR";
  return out;
}

std::string decoded(std::string_view encoded) {
  std::string out;
  if (!percent_decode(encoded, &out)) return "ERROR";
  return out;
}

TEST(Uri, PlainPathsPassThrough) {
  EXPECT_EQ(normalized("/"), "/");
  EXPECT_EQ(normalized("/index.html"), "/index.html");
  EXPECT_EQ(normalized("/a/b/c.txt"), "/a/b/c.txt");
  EXPECT_EQ(normalized("/..."), "/...");  // a file name, not a dot segment
  EXPECT_EQ(normalized("/a..b/.c"), "/a..b/.c");
}

TEST(Uri, DecodesPercentEscapesInEitherCase) {
  EXPECT_EQ(normalized("/a%20b"), "/a b");
  EXPECT_EQ(normalized("/%41%4a%4A"), "/AJJ");
  EXPECT_EQ(normalized("/%e2%82%ac"), "/\xe2\x82\xac");
  EXPECT_EQ(normalized("/100%25"), "/100%");
}

TEST(Uri, DecodingHappensOnceOnly) {
  // "%2541" is "%41" after one decode; it must not become "A".
  EXPECT_EQ(normalized("/%2541"), "/%41");
  EXPECT_EQ(normalized("/%252e%252e/x"), "/%2e%2e/x");
}

TEST(Uri, RejectsInvalidOrTruncatedEscapes) {
  EXPECT_EQ(normalized("/%zz"), "ERROR");
  EXPECT_EQ(normalized("/%4"), "ERROR");
  EXPECT_EQ(normalized("/%"), "ERROR");
  EXPECT_EQ(normalized("/a%g1"), "ERROR");
  EXPECT_EQ(normalized("/a%1g"), "ERROR");
}

TEST(Uri, RejectsADecodedNul) {
  EXPECT_EQ(normalized("/%00"), "ERROR");
  EXPECT_EQ(normalized("/a%00.html"), "ERROR");
}

TEST(Uri, RejectsPathsThatAreNotAbsolute) {
  EXPECT_EQ(normalized(""), "ERROR");
  EXPECT_EQ(normalized("a/b"), "ERROR");
  EXPECT_EQ(normalized("*"), "ERROR");
  EXPECT_EQ(normalized("%2Fa"), "ERROR");
}

TEST(Uri, MergesRepeatedSlashes) {
  EXPECT_EQ(normalized("//etc/passwd"), "/etc/passwd");
  EXPECT_EQ(normalized("/a///b//c"), "/a/b/c");
  EXPECT_EQ(normalized("/a//"), "/a/");
}

TEST(Uri, RemovesDotSegments) {
  EXPECT_EQ(normalized("/./a/./b"), "/a/b");
  EXPECT_EQ(normalized("/a/."), "/a/");
  EXPECT_EQ(normalized("/."), "/");
  EXPECT_EQ(normalized("/a/%2e/b"), "/a/b");
}

TEST(Uri, ResolvesDotDotWithinTheRoot) {
  EXPECT_EQ(normalized("/a/b/../c"), "/a/c");
  EXPECT_EQ(normalized("/a/b/.."), "/a/");
  EXPECT_EQ(normalized("/a/.."), "/");
  EXPECT_EQ(normalized("/a/../b/../c/d"), "/c/d");
  EXPECT_EQ(normalized("/a/%2e%2e/b"), "/b");
  // Slashes merge before ".." applies (as in nginx and the file system), so
  // ".." removes "a", not the empty segment RFC 3986 would see.
  EXPECT_EQ(normalized("/a//../b"), "/b");
}

TEST(Uri, RejectsEveryWayOfClimbingAboveTheRoot) {
  for (std::string_view attack : {
           "/..",
           "/../etc/passwd",
           "/%2e%2e/etc/passwd",
           "/%2E%2E/etc/passwd",
           "/%2E%2E%2Fetc/passwd",
           "/.%2e/etc/passwd",
           "/a/../../etc/passwd",
           "/..%2f..%2fetc/passwd",
           "/a%2f..%2f..%2fetc/passwd",
           "/./../x",
           "//../x",
       }) {
    EXPECT_EQ(normalized(attack), "ERROR") << attack;
  }
}

TEST(Uri, DecodedSlashIsASeparator) {
  EXPECT_EQ(normalized("/a%2Fb"), "/a/b");
  EXPECT_EQ(normalized("/a%2f%2fb"), "/a/b");
  EXPECT_EQ(normalized("/a%2F"), "/a/");
  EXPECT_EQ(normalized("/a/b%2F..%2Fc"), "/a/c");
}

TEST(Uri, KeepsTheTrailingSlash) {
  EXPECT_EQ(normalized("/dir/"), "/dir/");
  EXPECT_EQ(normalized("/dir"), "/dir");
  EXPECT_EQ(normalized("/a/b/./"), "/a/b/");
}

TEST(Uri, BackslashIsAnOrdinaryByte) {
  EXPECT_EQ(normalized("/a\\..\\b"), "/a\\..\\b");
  EXPECT_EQ(normalized("/%5c..%5cetc"), "/\\..\\etc");
  EXPECT_EQ(normalized("/..\\x"), "/..\\x");
}

TEST(Uri, ReusesTheCallersBufferAndReplacesItsContents) {
  std::string out = "previous contents that are long enough to need a heap block";
  const char* data = out.data();
  ASSERT_TRUE(normalize_path("/x", &out));
  EXPECT_EQ(out, "/x");
  EXPECT_EQ(out.data(), data);
}

TEST(Uri, PercentDecodeForQueries) {
  EXPECT_EQ(decoded("a%3Db%26c"), "a=b&c");
  EXPECT_EQ(decoded("a+b"), "a+b");  // '+' is the caller's business
  EXPECT_EQ(decoded(""), "");
  EXPECT_EQ(decoded("%00"), std::string(1, '\0'));
  EXPECT_EQ(decoded("%"), "ERROR");
  EXPECT_EQ(decoded("x%2"), "ERROR");
  EXPECT_EQ(decoded("%xy"), "ERROR");
}

TEST(Uri, EncodingAPathRoundTripsThroughNormalisation) {
  std::string encoded;
  append_percent_encoded_path("/a b/100%/q?x#y/\xe2\x82\xac/~-._!$&'()*+,;=:@", &encoded);
  EXPECT_EQ(encoded, "/a%20b/100%25/q%3Fx%23y/%E2%82%AC/~-._!$&'()*+,;=:@");
  std::string back;
  ASSERT_TRUE(normalize_path(encoded, &back));
  EXPECT_EQ(back, "/a b/100%/q?x#y/\xe2\x82\xac/~-._!$&'()*+,;=:@");
}

TEST(Uri, NormalizedPathViewsTheRequestWhenNothingNeedsDoing) {
  std::string scratch = "untouched";
  const std::string_view plain = "/docs/a.html";
  bool dot = true;
  Result<std::string_view> view = normalized_path(plain, &scratch, &dot);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->data(), plain.data());  // no copy
  EXPECT_FALSE(dot);
  EXPECT_EQ(scratch, "untouched");
  view = normalized_path("/a/%2e%2e/b//.env", &scratch, &dot);
  ASSERT_TRUE(view);
  EXPECT_EQ(*view, "/b/.env");
  EXPECT_EQ(view->data(), scratch.data());
  EXPECT_TRUE(dot);
  EXPECT_FALSE(normalized_path("/../x", &scratch));
  EXPECT_FALSE(normalized_path("/a%00", &scratch));
}

TEST(PathPrefix, IsNormalisedWithoutItsFinalSlash) {
  EXPECT_EQ(normalize_prefix("/assets/").value(), "/assets");
  EXPECT_EQ(normalize_prefix("/assets").value(), "/assets");
  EXPECT_EQ(normalize_prefix("/").value(), "");
  EXPECT_EQ(normalize_prefix("//a/./b/../c//").value(), "/a/c");
  EXPECT_FALSE(normalize_prefix("assets/").ok());
  EXPECT_FALSE(normalize_prefix("").ok());
  EXPECT_FALSE(normalize_prefix("/../x").ok());
}

TEST(PathPrefix, APathIsBeneathItOnlyAtASegment) {
  std::string_view rest;
  EXPECT_TRUE(path_beneath("/assets", "/assets", &rest));
  EXPECT_EQ(rest, "");
  EXPECT_TRUE(path_beneath("/assets", "/assets/css/a.css", &rest));
  EXPECT_EQ(rest, "/css/a.css");
  EXPECT_FALSE(path_beneath("/assets", "/assetsx/a.css", &rest));
  EXPECT_FALSE(path_beneath("/assets", "/asset", &rest));
  EXPECT_TRUE(path_beneath("", "/anything", &rest));
  EXPECT_EQ(rest, "/anything");
}

}  // namespace
}  // namespace tern::http
