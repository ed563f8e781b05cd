#include "files/static_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include "files/static_files_fixture.h"
#include "support/temp_dir.h"
#include "support/unprivileged.h"

// Counts heap allocations on this thread, to check that a warmed-up handler
// serves without allocating.
namespace {
thread_local size_t g_allocations = 0;
}  // namespace

// GCC flags free() of what this operator new returned once both are inlined
// into one caller: a false positive for a replacement pair built on malloc.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t size) {
  ++g_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
// The nothrow forms too (std::stable_sort's temporary buffer uses them):
// replacing only some would pair a sanitizer's new with this delete.
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  ++g_allocations;
  return std::malloc(size == 0 ? 1 : size);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace tern::files {
namespace {

using namespace test;  // NOLINT: the fixture and its helpers
using namespace std::chrono_literals;
using http::Method;

TEST_F(StaticFilesTest, ServesARegularFile) {
  StaticResult r = get("/hello.txt");
  EXPECT_EQ(r.status, 200);
  ASSERT_TRUE(r.file);
  EXPECT_EQ(r.offset, 0u);
  EXPECT_EQ(r.length, 5u);
  EXPECT_TRUE(r.send_body);
  EXPECT_EQ(body_of(r), "hello");
  EXPECT_EQ(r.content_type, "text/plain; charset=utf-8");
  EXPECT_EQ(r.etag, "\"3b9aca00-5\"");
  EXPECT_EQ(r.last_modified, kMtimeText);
  EXPECT_EQ(r.fields->text(), "Content-Type: text/plain; charset=utf-8\r\nLast-Modified: " +
                          std::string(kMtimeText) + "\r\nETag: \"3b9aca00-5\"\r\n");
  EXPECT_FALSE(r.gzip);
  EXPECT_FALSE(r.vary_accept_encoding);
  EXPECT_EQ(r.content_range(), "");
  // The second time from the file's memo: the same fields.
  StaticResult again = get("/hello.txt");
  EXPECT_EQ(again.fields->text(), r.fields->text());
  EXPECT_EQ(again.content_type, r.content_type);
}

TEST_F(StaticFilesTest, DecodesThePath) {
  StaticResult r = get("/file%20with%20space.txt");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(body_of(r), "spaced");
}

TEST_F(StaticFilesTest, HeadReportsTheLengthWithoutABody) {
  StaticResult r = serve(request_for(Method::kHead, "/hello.txt"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.length, 5u);
  EXPECT_FALSE(r.send_body);
  EXPECT_EQ(r.etag, "\"3b9aca00-5\"");
}

TEST_F(StaticFilesTest, OtherMethodsAreNotAllowed) {
  for (Method m : {Method::kPost, Method::kPut, Method::kDelete, Method::kOptions, Method::kPatch,
                   Method::kTrace, Method::kOther}) {
    StaticResult r = serve(request_for(m, "/hello.txt"));
    EXPECT_EQ(r.status, 405);
    EXPECT_EQ(r.allow, "GET, HEAD");
    EXPECT_FALSE(r.file);
    EXPECT_FALSE(r.send_body);
  }
}

TEST_F(StaticFilesTest, APostIsLookedUpBeforeItIsRefused) {
  // As nginx: only where there is something to serve is a POST 405.
  EXPECT_EQ(serve(request_for(Method::kPost, "/missing.txt")).status, 404);
  StaticResult moved = serve(request_for(Method::kPost, "/sub"));
  EXPECT_EQ(moved.status, 301);
  EXPECT_EQ(moved.location, "/sub/");
  EXPECT_EQ(serve(request_for(Method::kPost, "/noindex/")).status, 403);
  StaticResult file = serve(request_for(Method::kPost, "/sub/"));
  EXPECT_EQ(file.status, 405);
  EXPECT_EQ(file.allow, "GET, HEAD");
  EXPECT_FALSE(file.file);
  // Other methods are refused before any lookup.
  EXPECT_EQ(serve(request_for(Method::kPut, "/missing.txt")).status, 405);
}

TEST_F(StaticFilesTest, MissingFileIsNotFound) {
  EXPECT_EQ(get("/nope.txt").status, 404);
  EXPECT_EQ(get("/nope/deeper.txt").status, 404);
  EXPECT_EQ(get("/hello.txt/").status, 404);
  EXPECT_EQ(get("/hello.txt/x").status, 404);
}

TEST_F(StaticFilesTest, MalformedOrEscapingPathsAreBadRequests) {
  for (std::string_view path : {
           "/%zz", "/%4", "/%00", "/a%00.html", "/../etc/passwd", "/%2e%2e/etc/passwd",
           "/%2E%2E%2Fetc/passwd", "/a/../../etc/passwd", "/..%2f..%2fetc/passwd",
           "/..", "relative.txt", "",
       }) {
    StaticResult r = get(path);
    EXPECT_EQ(r.status, 400) << path;
    EXPECT_FALSE(r.file) << path;
  }
}

TEST_F(StaticFilesTest, NeverServesTheRealEtcPasswd) {
  std::string real = read_file("/etc/passwd");
  for (std::string_view path : {
           "//etc/passwd", "/etc/passwd", "/etc//passwd", "/./etc/passwd", "/sub/../etc/passwd",
           "/%2Fetc%2Fpasswd", "///etc///passwd", "/../etc/passwd", "/%2e%2e/etc/passwd",
           "/%2E%2E%2Fetc/passwd", "/a/../../etc/passwd", "/..%2f..%2fetc/passwd",
           "/etc/passwd%00", "/sub/..%2F..%2F..%2Fetc/passwd",
       }) {
    StaticResult r = get(path);
    if (r.status == 200) {
      EXPECT_EQ(body_of(r), "the root's own etc/passwd") << path;
    } else {
      EXPECT_EQ(r.status, 400) << path;
    }
    if (!real.empty()) {
      EXPECT_NE(body_of(r), real) << path;
    }
  }
  // And with the root's copy gone, "//etc/passwd" is simply not found.
  ASSERT_EQ(::unlink(root_.at("etc/passwd").c_str()), 0);
  EXPECT_EQ(make()->serve(request_for(Method::kGet, "//etc/passwd"), now_).status, 404);
}

TEST_F(StaticFilesTest, DirectoryWithoutSlashRedirects) {
  StaticResult r = get("/sub");
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.location, "/sub/");
  EXPECT_FALSE(r.file);
  EXPECT_FALSE(r.send_body);
}

TEST_F(StaticFilesTest, RedirectKeepsTheQueryAndReencodesThePath) {
  StaticResult r = serve(request_for(Method::kGet, "/sub", "a=1&b=%20"));
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.location, "/sub/?a=1&b=%20");
  r = get("/dir%20with%20space");
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.location, "/dir%20with%20space/");
  r = get("//sub/./");  // normalised first: "/sub/" is a directory with slash
  EXPECT_EQ(r.status, 200);
}

TEST_F(StaticFilesTest, DirectoryWithSlashServesItsIndex) {
  StaticResult r = get("/sub/");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(body_of(r), "sub index");
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  r = get("/");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(body_of(r), "root index");
  r = get("/sub%2F");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(body_of(r), "sub index");
}

TEST_F(StaticFilesTest, IndexNamesAreTriedInOrder) {
  ASSERT_TRUE(root_.write("sub/default.htm", "default"));
  StaticFilesOptions options;
  options.index = {"missing.html", "default.htm", "index.html"};
  auto files = make(options);
  StaticResult r = files->serve(request_for(Method::kGet, "/sub/"), now_);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(body_of(r), "default");
  r = files->serve(request_for(Method::kGet, "/"), now_);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(body_of(r), "root index");
}

TEST_F(StaticFilesTest, DirectoryWithoutIndexIsForbidden) {
  EXPECT_EQ(get("/noindex/").status, 403);
  EXPECT_EQ(get("/dir%20with%20space/").status, 403);
}

TEST_F(StaticFilesTest, IndexThatIsADirectoryIsSkipped) {
  ASSERT_TRUE(root_.mkdir("noindex/index.html"));
  EXPECT_EQ(get("/noindex/").status, 403);
}

TEST_F(StaticFilesTest, InvalidIndexNamesAreRejectedAtStartUp) {
  for (const char* bad : {"", ".", "..", "a/b", "/index.html"}) {
    StaticFilesOptions options;
    options.index = {bad};
    EXPECT_THROW(make(options), std::invalid_argument) << bad;
  }
}

TEST_F(StaticFilesTest, MissingRootIsAStartUpError) {
  StaticFilesOptions options;
  options.root = root_.at("missing");
  EXPECT_THROW(StaticFiles{options}, std::system_error);
}

TEST_F(StaticFilesTest, UnreadableFileIsForbidden) {
  ASSERT_TRUE(root_.chmod("", 0755));  // mkdtemp's 0700 would lock out everything
  int rc = testing::run_unprivileged([&] {
    StaticFiles files(StaticFilesOptions{.root = root_.path()});
    if (files.serve(request_for(Method::kGet, "/locked.txt"), now_).status != 403) return 1;
    if (files.serve(request_for(Method::kGet, "/hello.txt"), now_).status != 200) return 2;
    return 0;
  });
  if (rc == testing::kCannotDropPrivileges) GTEST_SKIP() << "cannot drop root privileges here";
  EXPECT_EQ(rc, 0);
}

TEST_F(StaticFilesTest, FifoIsForbiddenAndDoesNotHang) {
  StaticResult r = get("/pipe");
  EXPECT_EQ(r.status, 403);
  EXPECT_FALSE(r.file);
}

TEST_F(StaticFilesTest, SymlinkInsideTheRootIsServed) {
  StaticResult r = get("/link.txt");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(body_of(r), "hello");
}

TEST_F(StaticFilesTest, SymlinkOutOfTheRootIsForbiddenByDefault) {
  StaticResult r = get("/out.txt");
  EXPECT_EQ(r.status, 403);
  EXPECT_FALSE(r.file);
}

TEST_F(StaticFilesTest, SymlinkOutOfTheRootIsServedWhenAllowed) {
  StaticFilesOptions options;
  options.symlinks = SymlinkPolicy::kAnywhere;
  StaticResult r = make(options)->serve(request_for(Method::kGet, "/out.txt"), now_);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(body_of(r), "secret");
}

TEST_F(StaticFilesTest, EditsBecomeVisibleAfterTheCacheValidity) {
  ASSERT_EQ(get("/hello.txt").length, 5u);
  ASSERT_TRUE(root_.write("hello.txt", "hello again"));
  now_ += 100ms;
  EXPECT_EQ(get("/hello.txt").length, 5u);
  now_ += 1s;
  StaticResult r = get("/hello.txt");
  EXPECT_EQ(r.length, 11u);
  EXPECT_EQ(body_of(r), "hello again");
}

TEST_F(StaticFilesTest, WarmRequestsDoNotAllocate) {
  StaticRequest request = with_encoding("/style.css", "gzip");
  request.range = "bytes=0-0";
  request.if_none_match = "\"nope\"";
  // Warm the cache and the buffers; the second request reads the hot file
  // into memory.
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(serve(request).status, 206);
    ASSERT_EQ(get("/sub").status, 301);
  }
  size_t before = g_allocations;
  for (int i = 0; i < 100; ++i) {
    StaticResult r = serve(request);
    ASSERT_EQ(r.status, 206);
    StaticResult redirect = get("/sub");
    ASSERT_EQ(redirect.status, 301);
  }
  EXPECT_EQ(g_allocations, before);
}

// --- Field helpers ---

TEST(AcceptsGzip, FollowsTokensAndQValues) {
  EXPECT_TRUE(accepts_gzip("gzip"));
  EXPECT_TRUE(accepts_gzip("GZIP"));
  EXPECT_TRUE(accepts_gzip("x-gzip"));
  EXPECT_TRUE(accepts_gzip("deflate, gzip;q=0.5"));
  EXPECT_TRUE(accepts_gzip("br ; q=1, gzip ; Q=0.001"));
  EXPECT_TRUE(accepts_gzip("*"));
  EXPECT_TRUE(accepts_gzip("br, *;q=0.1"));
  EXPECT_FALSE(accepts_gzip(""));
  EXPECT_FALSE(accepts_gzip("identity"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0.0"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0.000"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0, *"));  // explicit refusal beats the wildcard
  EXPECT_FALSE(accepts_gzip("*;q=0"));
  EXPECT_FALSE(accepts_gzip("gzipx, xgzip"));
}

TEST(EtagListMatchesWeak, ComparesOpaqueTags) {
  EXPECT_TRUE(etag_list_matches_weak("\"a\"", "\"a\""));
  EXPECT_TRUE(etag_list_matches_weak("W/\"a\"", "\"a\""));
  EXPECT_TRUE(etag_list_matches_weak("\"a\"", "W/\"a\""));
  EXPECT_TRUE(etag_list_matches_weak(" \"b\" ,\t\"a\"", "\"a\""));
  EXPECT_TRUE(etag_list_matches_weak("\"x,y\", \"a\"", "\"a\""));  // a comma inside a tag
  EXPECT_TRUE(etag_list_matches_weak(" * ", "\"a\""));
  EXPECT_FALSE(etag_list_matches_weak("\"b\"", "\"a\""));
  EXPECT_FALSE(etag_list_matches_weak("a", "\"a\""));
  EXPECT_FALSE(etag_list_matches_weak("\"a", "\"a\""));
  EXPECT_FALSE(etag_list_matches_weak("", "\"a\""));
  EXPECT_FALSE(etag_list_matches_weak("\"*\"", "\"a\""));
}

TEST(PreconditionFailed, IfMatchComparesStronglyAndIfUnmodifiedSinceNeedsADate) {
  EXPECT_FALSE(precondition_failed("\"a\"", "", "\"a\"", std::nullopt));
  EXPECT_FALSE(precondition_failed("*", "", "", std::nullopt));  // any representation
  EXPECT_TRUE(precondition_failed("W/\"a\"", "", "\"a\"", std::nullopt));
  EXPECT_TRUE(precondition_failed("\"a\"", "", "W/\"a\"", std::nullopt));
  EXPECT_TRUE(precondition_failed("\"a\"", "", "", std::nullopt));
  EXPECT_FALSE(precondition_failed("", "", "\"a\"", 1000));
  const char* date = "Sun, 09 Sep 2001 01:46:40 GMT";  // 1000000000
  EXPECT_FALSE(precondition_failed("", date, "", 1000000000));
  EXPECT_TRUE(precondition_failed("", date, "", 1000000001));
  EXPECT_FALSE(precondition_failed("", date, "", std::nullopt));  // no date to compare: ignored
  EXPECT_FALSE(precondition_failed("", "garbage", "", 1000000001));
}

}  // namespace
}  // namespace tern::files
