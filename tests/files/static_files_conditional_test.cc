// StaticFiles: conditional requests, byte ranges and gzip siblings.
#include "files/static_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <string_view>

#include "files/static_files_fixture.h"

namespace tern::files {
namespace {

using namespace test;  // NOLINT: the fixture and its helpers
using namespace std::chrono_literals;
using http::Method;

// --- Conditional requests ---

StaticRequest conditional(std::string_view if_none_match, std::string_view if_modified_since,
                          Method method = Method::kGet) {
  StaticRequest request = request_for(method, "/hello.txt");
  request.if_none_match = if_none_match;
  request.if_modified_since = if_modified_since;
  return request;
}

TEST_F(StaticFilesTest, MatchingIfNoneMatchIsNotModified) {
  for (std::string_view inm : {"\"3b9aca00-5\"", "W/\"3b9aca00-5\"", "\"x\", \"3b9aca00-5\"",
                               "\"x\",W/\"3b9aca00-5\" ", "*"}) {
    StaticResult r = serve(conditional(inm, ""));
    EXPECT_EQ(r.status, 304) << inm;
    EXPECT_FALSE(r.send_body) << inm;
    EXPECT_EQ(r.length, 0u) << inm;
    EXPECT_EQ(r.etag, "\"3b9aca00-5\"") << inm;
  }
  EXPECT_EQ(serve(conditional("\"3b9aca00-5\"", "", Method::kHead)).status, 304);
}

TEST_F(StaticFilesTest, OtherIfNoneMatchIsServedInFull) {
  for (std::string_view inm : {"\"3b9aca00-6\"", "\"3b9aca00-5", "3b9aca00-5", "\"\""}) {
    StaticResult r = serve(conditional(inm, ""));
    EXPECT_EQ(r.status, 200) << inm;
    EXPECT_TRUE(r.send_body) << inm;
  }
}

TEST_F(StaticFilesTest, IfModifiedSinceComparesWholeSeconds) {
  EXPECT_EQ(serve(conditional("", kMtimeText)).status, 304);
  EXPECT_EQ(serve(conditional("", "Sun, 09 Sep 2001 01:46:41 GMT")).status, 304);
  EXPECT_EQ(serve(conditional("", "Sunday, 09-Sep-01 01:46:40 GMT")).status, 304);
  EXPECT_EQ(serve(conditional("", "Sun, 09 Sep 2001 01:46:39 GMT")).status, 200);
  EXPECT_EQ(serve(conditional("", "not a date")).status, 200);
}

TEST_F(StaticFilesTest, IfNoneMatchOverridesIfModifiedSince) {
  // RFC 9110 13.2.2: when If-None-Match is present, If-Modified-Since is ignored.
  EXPECT_EQ(serve(conditional("\"other\"", kMtimeText)).status, 200);
  EXPECT_EQ(serve(conditional("\"3b9aca00-5\"", "Sun, 09 Sep 2001 01:46:39 GMT")).status, 304);
}

TEST_F(StaticFilesTest, AFailedIfMatchOrIfUnmodifiedSinceIsPreconditionFailed) {
  // RFC 9110 13.2.2: the preconditions come first, and decide before
  // If-None-Match; If-Match compares strongly.
  auto with = [](std::string_view if_match, std::string_view if_unmodified_since, std::string_view inm = {}) {
    StaticRequest request = conditional(inm, "");
    request.if_match = if_match;
    request.if_unmodified_since = if_unmodified_since;
    return request;
  };
  for (std::string_view im : {"\"3b9aca00-5\"", "\"x\", \"3b9aca00-5\"", "*"}) {
    EXPECT_EQ(serve(with(im, "")).status, 200) << im;
  }
  for (std::string_view im : {"\"3b9aca00-6\"", "W/\"3b9aca00-5\"", "3b9aca00-5"}) {
    StaticResult r = serve(with(im, ""));
    EXPECT_EQ(r.status, 412) << im;
    EXPECT_FALSE(r.send_body) << im;
  }
  EXPECT_EQ(serve(with("\"other\"", "", "\"3b9aca00-5\"")).status, 412);
  EXPECT_EQ(serve(with("", kMtimeText)).status, 200);
  EXPECT_EQ(serve(with("", "Sun, 09 Sep 2001 01:46:39 GMT")).status, 412);  // modified since
  EXPECT_EQ(serve(with("", "not a date")).status, 200);                      // ignored
  // If-Match present: If-Unmodified-Since is not read.
  EXPECT_EQ(serve(with("*", "Sun, 09 Sep 2001 01:46:39 GMT")).status, 200);
}

// --- Ranges ---

StaticRequest ranged(std::string_view range, std::string_view if_range = {},
                     Method method = Method::kGet) {
  StaticRequest request = request_for(method, "/big.bin");
  request.range = range;
  request.if_range = if_range;
  return request;
}

TEST_F(StaticFilesTest, SingleRangeIsPartialContent) {
  StaticResult r = serve(ranged("bytes=0-9"));
  EXPECT_EQ(r.status, 206);
  EXPECT_EQ(r.offset, 0u);
  EXPECT_EQ(r.length, 10u);
  EXPECT_TRUE(r.send_body);
  EXPECT_EQ(r.content_range(), "bytes 0-9/1000");
  EXPECT_EQ(body_of(r), thousand_bytes().substr(0, 10));

  r = serve(ranged("bytes=990-"));
  EXPECT_EQ(r.status, 206);
  EXPECT_EQ(r.content_range(), "bytes 990-999/1000");
  EXPECT_EQ(body_of(r), thousand_bytes().substr(990));

  r = serve(ranged("bytes=-10"));
  EXPECT_EQ(r.status, 206);
  EXPECT_EQ(r.offset, 990u);
  EXPECT_EQ(r.length, 10u);
}

TEST_F(StaticFilesTest, ResultCopiesKeepTheirContentRange) {
  StaticResult copy;
  {
    StaticResult r = serve(ranged("bytes=5-6"));
    copy = r;
  }
  EXPECT_EQ(copy.content_range(), "bytes 5-6/1000");
}

TEST_F(StaticFilesTest, UnsatisfiableRangeIs416) {
  StaticResult r = serve(ranged("bytes=1000-"));
  EXPECT_EQ(r.status, 416);
  EXPECT_EQ(r.content_range(), "bytes */1000");
  EXPECT_FALSE(r.send_body);
  EXPECT_EQ(r.length, 0u);
}

TEST_F(StaticFilesTest, MultipleOrInvalidRangesGetTheWholeFile) {
  for (std::string_view range : {"bytes=0-1,5-6", "bytes=abc", "lines=1-2", "bytes=5-1"}) {
    StaticResult r = serve(ranged(range));
    EXPECT_EQ(r.status, 200) << range;
    EXPECT_EQ(r.length, 1000u) << range;
    EXPECT_EQ(r.content_range(), "") << range;
  }
}

TEST_F(StaticFilesTest, HeadIgnoresRange) {
  StaticResult r = serve(ranged("bytes=0-9", {}, Method::kHead));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.length, 1000u);
}

TEST_F(StaticFilesTest, IfRangeMustMatchExactly) {
  std::string etag(get("/big.bin").etag);
  EXPECT_EQ(serve(ranged("bytes=0-9", etag)).status, 206);
  EXPECT_EQ(serve(ranged("bytes=0-9", kMtimeText)).status, 206);
  // Anything else sends the whole representation.
  std::string weak = "W/" + etag;  // If-Range needs a strong match
  for (std::string_view if_range : {std::string_view("\"stale-tag\""), std::string_view(weak),
                                    std::string_view("Sun, 09 Sep 2001 01:46:41 GMT"),
                                    std::string_view("garbage")}) {
    StaticResult r = serve(ranged("bytes=0-9", if_range));
    EXPECT_EQ(r.status, 200) << if_range;
    EXPECT_EQ(r.length, 1000u) << if_range;
  }
}

TEST_F(StaticFilesTest, NotModifiedWinsOverRange) {
  StaticRequest request = ranged("bytes=0-9");
  request.if_none_match = "*";
  EXPECT_EQ(serve(request).status, 304);
}

// --- gzip_static ---


TEST_F(StaticFilesTest, ServesTheGzipSiblingWhenAccepted) {
  StaticResult plain = serve(with_encoding("/style.css", ""));
  StaticResult r = serve(with_encoding("/style.css", "gzip, deflate, br"));
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.gzip);
  EXPECT_TRUE(r.vary_accept_encoding);
  EXPECT_EQ(body_of(r), "GZ");
  EXPECT_EQ(r.length, 2u);
  EXPECT_EQ(r.content_type, "text/css; charset=utf-8");
  EXPECT_NE(r.etag, plain.etag);  // a different representation
}

// A client that takes no coding costs no probe: it gets the file, and Vary
// only once a sibling is known.
TEST_F(StaticFilesTest, NoProbeForAClientThatTakesNoCoding) {
  const size_t entries = files().cache().size();
  StaticResult first = serve(with_encoding("/style.css", ""));
  EXPECT_FALSE(first.gzip);
  EXPECT_FALSE(first.vary_accept_encoding);
  EXPECT_EQ(files().cache().size(), entries + 1) << "the file only, no sibling looked up";
  EXPECT_EQ(body_of(first), "body { color: red }");
}

TEST_F(StaticFilesTest, VariesWhenGzipIsNotAcceptedOnceTheSiblingIsKnown) {
  ASSERT_TRUE(serve(with_encoding("/style.css", "gzip")).gzip);
  for (std::string_view ae : {"", "deflate, br", "gzip;q=0", "gzip; q=0.000, *", "identity"}) {
    StaticResult r = serve(with_encoding("/style.css", ae));
    EXPECT_EQ(r.status, 200) << ae;
    EXPECT_FALSE(r.gzip) << ae;
    EXPECT_TRUE(r.vary_accept_encoding) << ae;
    EXPECT_EQ(body_of(r), "body { color: red }") << ae;
  }
}

// A missing sibling is remembered with the file, not as cache entries of
// its own: a site without siblings fills the cache with its files only.
TEST_F(StaticFilesTest, AMissingSiblingTakesNoCacheEntry) {
  const size_t entries = files().cache().size();
  StaticResult r = serve(with_encoding("/hello.txt", "gzip, br"));
  EXPECT_FALSE(r.gzip);
  EXPECT_EQ(files().cache().size(), entries + 1);
}

TEST_F(StaticFilesTest, NoGzipSiblingMeansNoVary) {
  StaticResult r = serve(with_encoding("/hello.txt", "gzip"));
  EXPECT_FALSE(r.gzip);
  EXPECT_FALSE(r.vary_accept_encoding);
}

TEST_F(StaticFilesTest, GzipStaticCanBeTurnedOff) {
  StaticFilesOptions options;
  options.gzip_static = false;
  StaticResult r = make(options)->serve(with_encoding("/style.css", "gzip"), now_);
  EXPECT_FALSE(r.gzip);
  EXPECT_FALSE(r.vary_accept_encoding);
  EXPECT_EQ(body_of(r), "body { color: red }");
}

TEST_F(StaticFilesTest, RangesApplyToTheGzipBytes) {
  StaticRequest request = with_encoding("/style.css", "gzip");
  request.range = "bytes=1-";
  StaticResult r = serve(request);
  EXPECT_EQ(r.status, 206);
  EXPECT_TRUE(r.gzip);
  EXPECT_EQ(r.content_range(), "bytes 1-1/2");
  EXPECT_EQ(body_of(r), "Z");
}

TEST_F(StaticFilesTest, GzipFileRequestedDirectlyIsPlainGzip) {
  StaticResult r = serve(with_encoding("/style.css.gz", "gzip"));
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.gzip);
  EXPECT_EQ(r.content_type, "application/gzip");
}

TEST_F(StaticFilesTest, FieldsOfAGzipFileDependOnTheNameItIsServedFor) {
  // The same .gz file: for /style.css (gzip-encoded CSS) and under its own
  // name (a gzip file), alternately, so no remembered fields may leak.
  for (int i = 0; i < 2; ++i) {
    StaticResult own = serve(with_encoding("/style.css.gz", ""));
    EXPECT_EQ(own.fields->text(), "Content-Type: application/gzip\r\nLast-Modified: " +
                              std::string(own.last_modified) + "\r\nETag: " +
                              std::string(own.etag) + "\r\n");
    StaticResult encoded = serve(with_encoding("/style.css", "gzip"));
    ASSERT_TRUE(encoded.gzip);
    EXPECT_EQ(encoded.etag, own.etag);
    EXPECT_TRUE(encoded.fields->text().starts_with("Content-Type: text/css; charset=utf-8\r\n"))
        << encoded.fields->text();
  }
}

TEST_F(StaticFilesTest, IndexFileCanHaveAGzipSibling) {
  ASSERT_TRUE(root_.write("sub/index.html.gz", "GZINDEX"));
  StaticResult r = serve(with_encoding("/sub/", "gzip"));
  EXPECT_TRUE(r.gzip);
  EXPECT_EQ(body_of(r), "GZINDEX");
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
}

TEST_F(StaticFilesTest, GzipSiblingAddedLaterIsFoundAfterTheCacheValidity) {
  // The absence of hello.txt.gz is remembered with the file, as a cached
  // "not found" would be: trusted for cache_valid_for (1 s), then probed.
  ASSERT_FALSE(serve(with_encoding("/hello.txt", "gzip")).gzip);
  ASSERT_TRUE(root_.write("hello.txt.gz", "GZHELLO"));
  now_ += 500ms;
  StaticResult r = serve(with_encoding("/hello.txt", "gzip"));
  EXPECT_FALSE(r.gzip);
  EXPECT_FALSE(r.vary_accept_encoding);
  now_ += 600ms;
  r = serve(with_encoding("/hello.txt", "gzip"));
  EXPECT_TRUE(r.gzip);
  EXPECT_TRUE(r.vary_accept_encoding);
  EXPECT_EQ(body_of(r), "GZHELLO");
}

TEST_F(StaticFilesTest, GzipSiblingRemovedIsNoticedAfterTheCacheValidity) {
  ASSERT_TRUE(serve(with_encoding("/style.css", "gzip")).gzip);
  ASSERT_EQ(::unlink((root_.path() + "/style.css.gz").c_str()), 0);
  now_ += 1100ms;
  StaticResult r = serve(with_encoding("/style.css", "gzip"));
  EXPECT_FALSE(r.gzip);
  EXPECT_FALSE(r.vary_accept_encoding);
  // And once known absent, it stays so without a probe until it may have
  // changed; then a new sibling is served.
  ASSERT_TRUE(root_.write("style.css.gz", "GZ2"));
  now_ += 1100ms;
  r = serve(with_encoding("/style.css", "gzip"));
  EXPECT_TRUE(r.gzip);
  EXPECT_EQ(body_of(r), "GZ2");
}

// --- Caching and allocation ---

}  // namespace
}  // namespace tern::files
