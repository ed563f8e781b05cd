#include "files/open_file_cache.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "support/temp_dir.h"
#include "support/unprivileged.h"

namespace tern::files {
namespace {

using namespace std::chrono_literals;
using Clock = OpenFileCache::Clock;
using testing::TempDir;

std::string read_all(const OpenFile& file) {
  std::string s(file.size(), '\0');
  ssize_t n = ::pread(file.fd(), s.data(), s.size(), 0);
  s.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return s;
}

class OpenFileCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(root_.ok() && outside_.ok());
    ASSERT_TRUE(root_.write("a.html", "hello"));
    ASSERT_TRUE(root_.mkdir("sub"));
    ASSERT_TRUE(root_.write("sub/b.txt", "bee"));
    ASSERT_TRUE(outside_.write("secret.txt", "secret"));
  }

  std::unique_ptr<OpenFileCache> make(OpenFileCacheOptions options = {}) {
    return std::make_unique<OpenFileCache>(root_.path(), options);
  }
  static OpenFileCacheOptions with_symlinks(SymlinkPolicy policy) {
    OpenFileCacheOptions options;
    options.symlinks = policy;
    return options;
  }
  // The errno of a failed find, or 0 on success.
  static int error_of(const OpenFileCache::FileResult& r) { return r ? 0 : r.error().code; }

  TempDir root_;
  TempDir outside_;
  Clock::time_point t0_ = Clock::now();
};

TEST_F(OpenFileCacheTest, OpensARegularFileWithItsMetadata) {
  ASSERT_TRUE(root_.set_mtime("a.html", 784111777));
  auto cache = make();
  auto r = cache->find("/a.html", t0_);
  ASSERT_TRUE(r);
  const OpenFile& f = **r;
  EXPECT_TRUE(f.is_regular());
  EXPECT_FALSE(f.is_directory());
  EXPECT_EQ(f.size(), 5u);
  EXPECT_EQ(f.mtime(), 784111777);
  EXPECT_EQ(read_all(f), "hello");
  EXPECT_EQ(f.etag(), "\"2ebc98a1-5\"");  // nginx: "<mtime hex>-<size hex>"
  EXPECT_EQ(f.last_modified(), "Sun, 06 Nov 1994 08:49:37 GMT");
}

TEST_F(OpenFileCacheTest, OpensTheRootAndSubdirectories) {
  auto cache = make();
  for (const char* path : {"/", "/sub", "/sub/"}) {
    auto r = cache->find(path, t0_);
    ASSERT_TRUE(r) << path;
    EXPECT_TRUE((*r)->is_directory()) << path;
  }
}

TEST_F(OpenFileCacheTest, MissingPathsAreNotFound) {
  auto cache = make();
  auto r = cache->find("/nope.html", t0_);
  EXPECT_EQ(error_of(r), ENOENT);
  EXPECT_EQ(OpenFileCache::http_status(r.error()), 404);
  EXPECT_EQ(error_of(cache->find("/nodir/x", t0_)), ENOENT);
  EXPECT_EQ(error_of(cache->find("/a.html/x", t0_)), ENOTDIR);
}

TEST_F(OpenFileCacheTest, TrailingSlashOnAFileIsNotADirectory) {
  auto cache = make();
  auto r = cache->find("/a.html/", t0_);
  EXPECT_EQ(error_of(r), ENOTDIR);
  EXPECT_EQ(OpenFileCache::http_status(r.error()), 404);
}

TEST_F(OpenFileCacheTest, MapsErrorsToStatuses) {
  EXPECT_EQ(OpenFileCache::http_status({ENOENT, "open"}), 404);
  EXPECT_EQ(OpenFileCache::http_status({ENOTDIR, "open"}), 404);
  EXPECT_EQ(OpenFileCache::http_status({ENAMETOOLONG, "open"}), 404);
  EXPECT_EQ(OpenFileCache::http_status({EACCES, "open"}), 403);
  EXPECT_EQ(OpenFileCache::http_status({EPERM, "open"}), 403);
  EXPECT_EQ(OpenFileCache::http_status({ELOOP, "open"}), 403);
  EXPECT_EQ(OpenFileCache::http_status({EXDEV, "open"}), 403);
  EXPECT_EQ(OpenFileCache::http_status({EMFILE, "open"}), 503);
  EXPECT_EQ(OpenFileCache::http_status({ENFILE, "open"}), 503);
  EXPECT_EQ(OpenFileCache::http_status({EIO, "open"}), 500);
}

TEST_F(OpenFileCacheTest, HitWithinValidityReturnsTheSameFile) {
  auto cache = make();
  auto first = cache->find("/a.html", t0_);
  auto second = cache->find("/a.html", t0_ + 999ms);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ(cache->size(), 1u);
}

TEST_F(OpenFileCacheTest, ChangeIsSeenOnlyAfterValidFor) {
  auto cache = make();  // valid_for = 1 s
  auto old_file = cache->find("/a.html", t0_);
  ASSERT_TRUE(old_file);
  ASSERT_TRUE(root_.write("a.html", "hello, world"));
  // Within the validity window the cached entry is trusted without a stat.
  auto before = cache->find("/a.html", t0_ + 500ms);
  ASSERT_TRUE(before);
  EXPECT_EQ((*before)->size(), 5u);
  // Past it, the fstatat sees the new size and the file is reopened.
  auto after = cache->find("/a.html", t0_ + 1500ms);
  ASSERT_TRUE(after);
  EXPECT_EQ((*after)->size(), 12u);
  EXPECT_EQ(read_all(**after), "hello, world");
  EXPECT_NE(old_file->get(), after->get());
  EXPECT_EQ(cache->size(), 1u);
}

TEST_F(OpenFileCacheTest, UnchangedFileKeepsItsEntryAfterRevalidation) {
  auto cache = make();
  auto first = cache->find("/a.html", t0_);
  auto later = cache->find("/a.html", t0_ + 10s);
  ASSERT_TRUE(first && later);
  EXPECT_EQ(first->get(), later->get());
}

TEST_F(OpenFileCacheTest, ReplacedFileWithTheSameSizeIsReopened) {
  auto cache = make();
  auto first = cache->find("/a.html", t0_);
  ASSERT_TRUE(root_.write("new.html", "HELLO"));
  ASSERT_EQ(::rename(root_.at("new.html").c_str(), root_.at("a.html").c_str()), 0);
  auto later = cache->find("/a.html", t0_ + 2s);
  ASSERT_TRUE(later);
  EXPECT_EQ(read_all(**later), "HELLO");
  EXPECT_EQ(read_all(**first), "hello");  // a held file keeps its old contents
}

TEST_F(OpenFileCacheTest, VanishedFileIsNotFoundAfterValidFor) {
  auto cache = make();
  ASSERT_TRUE(cache->find("/a.html", t0_));
  ASSERT_EQ(::unlink(root_.at("a.html").c_str()), 0);
  EXPECT_TRUE(cache->find("/a.html", t0_ + 100ms));
  EXPECT_EQ(error_of(cache->find("/a.html", t0_ + 1100ms)), ENOENT);
}

TEST_F(OpenFileCacheTest, NotFoundIsCachedUntilValidFor) {
  auto cache = make();
  EXPECT_EQ(error_of(cache->find("/late.html", t0_)), ENOENT);
  EXPECT_EQ(cache->size(), 1u);
  ASSERT_TRUE(root_.write("late.html", "late"));
  EXPECT_EQ(error_of(cache->find("/late.html", t0_ + 500ms)), ENOENT);
  auto r = cache->find("/late.html", t0_ + 1s);
  ASSERT_TRUE(r);
  EXPECT_EQ(read_all(**r), "late");
}

TEST_F(OpenFileCacheTest, NotFoundIsNotCachedWhenDisabled) {
  OpenFileCacheOptions options;
  options.cache_not_found = false;
  auto cache = make(options);
  EXPECT_EQ(error_of(cache->find("/late.html", t0_)), ENOENT);
  EXPECT_EQ(cache->size(), 0u);
  ASSERT_TRUE(root_.write("late.html", "late"));
  EXPECT_TRUE(cache->find("/late.html", t0_));
}

TEST_F(OpenFileCacheTest, OtherErrorsAreNeverCached) {
  ASSERT_TRUE(root_.mkfifo("pipe"));
  auto cache = make();
  EXPECT_EQ(error_of(cache->find("/pipe", t0_)), EPERM);
  EXPECT_EQ(cache->size(), 0u);
}

TEST_F(OpenFileCacheTest, EvictsTheLeastRecentlyUsedEntryAtCapacity) {
  ASSERT_TRUE(root_.write("c.html", "c"));
  OpenFileCacheOptions options;
  options.max_entries = 2;
  auto cache = make(options);
  auto a = cache->find("/a.html", t0_);
  auto b = cache->find("/sub/b.txt", t0_);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(cache->find("/a.html", t0_));  // a is now the most recent
  ASSERT_TRUE(cache->find("/c.html", t0_));  // evicts b
  EXPECT_EQ(cache->size(), 2u);
  auto a_again = cache->find("/a.html", t0_);
  auto b_again = cache->find("/sub/b.txt", t0_);
  ASSERT_TRUE(a_again && b_again);
  EXPECT_EQ(a->get(), a_again->get());  // still cached
  EXPECT_NE(b->get(), b_again->get());  // reopened
  EXPECT_EQ(cache->size(), 2u);
}

TEST_F(OpenFileCacheTest, HeldFileOutlivesItsEviction) {
  OpenFileCacheOptions options;
  options.max_entries = 1;
  auto cache = make(options);
  auto a = cache->find("/a.html", t0_);
  ASSERT_TRUE(a);
  ASSERT_TRUE(cache->find("/sub/b.txt", t0_));
  cache->clear();
  EXPECT_EQ(cache->size(), 0u);
  EXPECT_EQ(read_all(**a), "hello");
}

TEST_F(OpenFileCacheTest, AForgottenPathIsOpenedAgainAtOnce) {
  auto cache = make();
  auto first = cache->find("/a.html", t0_);
  ASSERT_TRUE(first);
  ASSERT_TRUE(root_.write("new.html", "HELLO"));
  ASSERT_EQ(::rename(root_.at("new.html").c_str(), root_.at("a.html").c_str()), 0);
  cache->forget("/a.html");
  EXPECT_EQ(cache->size(), 0u);
  auto again = cache->find("/a.html", t0_ + 1ms);  // within valid_for, yet opened anew
  ASSERT_TRUE(again);
  EXPECT_EQ(read_all(**again), "HELLO");
  EXPECT_NE((*first)->inode(), (*again)->inode());
  cache->forget("/not-cached.html");  // nothing to forget: no effect
  EXPECT_EQ(cache->size(), 1u);
}

TEST_F(OpenFileCacheTest, EntriesUnusedSinceATimeAreDropped) {
  ASSERT_TRUE(root_.write("c.html", "c"));
  auto cache = make();
  auto a = cache->find("/a.html", t0_);
  ASSERT_TRUE(cache->find("/sub/b.txt", t0_ + 1s));
  ASSERT_TRUE(cache->find("/c.html", t0_ + 2s));
  ASSERT_TRUE(cache->find("/a.html", t0_ + 3s));  // used again: the most recent
  EXPECT_EQ(cache->drop_unused(t0_ + 2s), 1u);    // b, unused since 1 s
  EXPECT_EQ(cache->size(), 2u);
  EXPECT_EQ(cache->drop_unused(t0_ + 2s), 0u);
  EXPECT_EQ(cache->drop_unused(t0_ + 10s), 2u);
  EXPECT_EQ(cache->size(), 0u);
  auto again = cache->find("/a.html", t0_ + 11s);
  ASSERT_TRUE(a && again);
  EXPECT_NE(a->get(), again->get());  // opened anew
}

// Descriptors this process has open.
size_t open_descriptors() {
  size_t n = 0;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(dir)) n += e->d_name[0] != '.';
    ::closedir(dir);
  }
  return n;
}

TEST_F(OpenFileCacheTest, SheddingDescriptorsLetsGoOfTheLeastRecentlyUsedQuarter) {
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(root_.write("f" + std::to_string(i), "x"));
  auto cache = make();
  EXPECT_FALSE(cache->find("/missing", t0_));  // oldest, and holds no descriptor
  std::vector<std::shared_ptr<const OpenFile>> first;
  for (int i = 0; i < 100; ++i) {
    auto r = cache->find("/f" + std::to_string(i), t0_);
    ASSERT_TRUE(r);
    first.push_back(*r);
  }
  ASSERT_EQ(cache->size(), 101u);
  std::shared_ptr<const OpenFile> held = first[1];  // a response still sends from f1
  first.clear();
  const size_t before = open_descriptors();
  // A quarter of the 100 that hold one: f0..f24, of which f1 stays open.
  EXPECT_EQ(cache->shed_descriptors(), 24u);
  EXPECT_EQ(open_descriptors(), before - 24);
  EXPECT_EQ(cache->size(), 76u);
  EXPECT_EQ(read_all(*held), "x");
  auto kept = cache->find("/f25", t0_);
  ASSERT_TRUE(kept);
  EXPECT_EQ(open_descriptors(), before - 24);  // f25 was still cached: nothing opened
  ASSERT_TRUE(cache->find("/f0", t0_));
  EXPECT_EQ(open_descriptors(), before - 23);  // f0 was not: opened again
}

TEST_F(OpenFileCacheTest, AnOpenWithNoDescriptorLeftShedsAndTriesAgain) {
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(root_.write("f" + std::to_string(i), "x"));
  auto cache = make();
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(cache->find("/f" + std::to_string(i), t0_));
  // The soft limit at the lowest free descriptor: no open succeeds until
  // one below it closes.
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  const int lowest_free = ::dup(0);
  ASSERT_GE(lowest_free, 0);
  ::close(lowest_free);
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(lowest_free);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  auto r = cache->find("/a.html", t0_);
  const int err = r ? 0 : r.error().code;
  ::setrlimit(RLIMIT_NOFILE, &saved);
  EXPECT_EQ(err, 0) << std::strerror(err);
  ASSERT_TRUE(r);
  EXPECT_EQ(read_all(**r), "hello");
  EXPECT_EQ(cache->size(), 40u - 16u + 1u);  // at least 16 let go of, a.html added
}

TEST_F(OpenFileCacheTest, ZeroCapacityOpensEveryTime) {
  OpenFileCacheOptions options;
  options.max_entries = 0;
  auto cache = make(options);
  auto a = cache->find("/a.html", t0_);
  auto b = cache->find("/a.html", t0_);
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->get(), b->get());
  EXPECT_EQ(cache->size(), 0u);
}

TEST_F(OpenFileCacheTest, FifoIsRefusedWithoutBlocking) {
  // Opening a FIFO for reading blocks until a writer appears unless
  // O_NONBLOCK is used; if that were missing this test would hang.
  ASSERT_TRUE(root_.mkfifo("pipe"));
  for (SymlinkPolicy policy :
       {SymlinkPolicy::kInsideRoot, SymlinkPolicy::kAnywhere, SymlinkPolicy::kNever}) {
    auto cache = make(with_symlinks(policy));
    auto r = cache->find("/pipe", t0_);
    EXPECT_EQ(error_of(r), EPERM);
    EXPECT_EQ(OpenFileCache::http_status(r.error()), 403);
  }
}

TEST_F(OpenFileCacheTest, UnreadableFileIsForbidden) {
  // mkdtemp makes the root 0700; let "nobody" search it, then lock one file.
  ASSERT_TRUE(root_.chmod("", 0755));
  ASSERT_TRUE(root_.chmod("a.html", 0));
  ASSERT_TRUE(root_.write("open.txt", "open"));
  int rc = testing::run_unprivileged([&] {
    OpenFileCache cache(root_.path(), {});
    auto locked = cache.find("/a.html", t0_);
    if (locked || locked.error().code != EACCES) return 1;
    if (OpenFileCache::http_status(locked.error()) != 403) return 2;
    if (!cache.find("/open.txt", t0_)) return 3;  // the control: the rest is readable
    return 0;
  });
  if (rc == testing::kCannotDropPrivileges) GTEST_SKIP() << "cannot drop root privileges here";
  EXPECT_EQ(rc, 0);
}

TEST_F(OpenFileCacheTest, SymlinksInsideTheRootAreFollowedByDefault) {
  ASSERT_TRUE(root_.symlink("a.html", "link.html"));
  ASSERT_TRUE(root_.symlink("sub", "linkdir"));
  ASSERT_TRUE(root_.symlink("../a.html", "sub/up.html"));
  auto cache = make();
  for (const char* path : {"/link.html", "/sub/up.html"}) {
    auto r = cache->find(path, t0_);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(read_all(**r), "hello") << path;
  }
  auto b = cache->find("/linkdir/b.txt", t0_);
  ASSERT_TRUE(b);
  EXPECT_EQ(read_all(**b), "bee");
}

TEST_F(OpenFileCacheTest, SymlinksLeavingTheRootAreRefusedByDefault) {
  ASSERT_TRUE(root_.symlink(outside_.at("secret.txt"), "abs.txt"));
  ASSERT_TRUE(root_.symlink(outside_.path(), "outdir"));
  // A relative link that climbs out: "../tern-test-XXXXXX/secret.txt".
  std::string relative = "../" + outside_.path().substr(outside_.path().rfind('/') + 1);
  ASSERT_TRUE(root_.symlink(relative + "/secret.txt", "rel.txt"));
  ASSERT_TRUE(root_.symlink("/etc/passwd", "passwd"));
  auto cache = make();
  for (const char* path : {"/abs.txt", "/outdir/secret.txt", "/rel.txt", "/passwd"}) {
    auto r = cache->find(path, t0_);
    ASSERT_FALSE(r) << path;
    EXPECT_EQ(OpenFileCache::http_status(r.error()), 403) << path;
  }
}

TEST_F(OpenFileCacheTest, AbsoluteSymlinkIntoTheRootIsRefusedByDefault) {
  // RESOLVE_BENEATH rejects every absolute link, wherever it points.
  ASSERT_TRUE(root_.symlink(root_.at("a.html"), "abs-inside.html"));
  auto cache = make();
  auto r = cache->find("/abs-inside.html", t0_);
  ASSERT_FALSE(r);
  EXPECT_EQ(OpenFileCache::http_status(r.error()), 403);
}

TEST_F(OpenFileCacheTest, SymlinksLeavingTheRootAreFollowedWhenAllowed) {
  ASSERT_TRUE(root_.symlink(outside_.at("secret.txt"), "abs.txt"));
  ASSERT_TRUE(root_.symlink(outside_.path(), "outdir"));
  auto cache = make(with_symlinks(SymlinkPolicy::kAnywhere));
  for (const char* path : {"/abs.txt", "/outdir/secret.txt"}) {
    auto r = cache->find(path, t0_);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(read_all(**r), "secret");
  }
}

TEST_F(OpenFileCacheTest, NeverPolicyRefusesEverySymlink) {
  ASSERT_TRUE(root_.symlink("a.html", "link.html"));
  ASSERT_TRUE(root_.symlink("sub", "linkdir"));
  auto cache = make(with_symlinks(SymlinkPolicy::kNever));
  for (const char* path : {"/link.html", "/linkdir", "/linkdir/", "/linkdir/b.txt"}) {
    auto r = cache->find(path, t0_);
    ASSERT_FALSE(r) << path;
    EXPECT_EQ(r.error().code, ELOOP) << path;
    EXPECT_EQ(OpenFileCache::http_status(r.error()), 403) << path;
  }
}

TEST_F(OpenFileCacheTest, NeverPolicyStillOpensPlainPaths) {
  ASSERT_TRUE(root_.mkdir("sub/deep"));
  ASSERT_TRUE(root_.write("sub/deep/c.txt", "sea"));
  auto cache = make(with_symlinks(SymlinkPolicy::kNever));
  auto c = cache->find("/sub/deep/c.txt", t0_);
  ASSERT_TRUE(c);
  EXPECT_EQ(read_all(**c), "sea");
  for (const char* dir : {"/", "/sub", "/sub/deep/"}) {
    auto r = cache->find(dir, t0_);
    ASSERT_TRUE(r) << dir;
    EXPECT_TRUE((*r)->is_directory()) << dir;
  }
  EXPECT_EQ(error_of(cache->find("/a.html/", t0_)), ENOTDIR);
  EXPECT_EQ(error_of(cache->find("/a.html/x", t0_)), ENOTDIR);
  EXPECT_EQ(error_of(cache->find("/sub/missing/x", t0_)), ENOENT);
}

TEST_F(OpenFileCacheTest, FileSwappedForASymlinkIsRefusedAfterRevalidation) {
  auto cache = make(with_symlinks(SymlinkPolicy::kNever));
  ASSERT_TRUE(cache->find("/a.html", t0_));
  ASSERT_TRUE(root_.write("real.html", "hello"));
  ASSERT_EQ(::unlink(root_.at("a.html").c_str()), 0);
  ASSERT_TRUE(root_.symlink("real.html", "a.html"));
  EXPECT_EQ(error_of(cache->find("/a.html", t0_ + 2s)), ELOOP);
}

TEST_F(OpenFileCacheTest, DotDotCannotEscapeEvenIfPassedUnnormalised) {
  // Callers normalise first; the kernel check is a second line of defence.
  auto cache = make();
  auto r = cache->find("/../" + outside_.path().substr(5) + "/secret.txt", t0_);
  ASSERT_FALSE(r);
  EXPECT_EQ(OpenFileCache::http_status(r.error()), 403);
}

// A file's bytes come into memory at its second hit, not at the open: on a
// site larger than the cache, a miss never reads a file.
TEST_F(OpenFileCacheTest, AFileIsReadIntoMemoryOnlyOnceItIsHot) {
  auto cache = make();
  auto first = cache->find("/a.html", t0_);
  ASSERT_TRUE(first);
  EXPECT_FALSE((*first)->has_content());
  const size_t before = cache->bytes();
  auto second = cache->find("/a.html", t0_);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->get(), first->get());
  EXPECT_TRUE((*second)->has_content());
  EXPECT_EQ((*second)->content(), "hello");
  EXPECT_EQ(cache->bytes(), before + 5);
}

TEST_F(OpenFileCacheTest, FilesAboveTheMemoryLimitStayOnDisk) {
  OpenFileCacheOptions options;
  options.memory_max_file_bytes = 4;
  auto cache = make(options);
  ASSERT_TRUE(cache->find("/a.html", t0_));
  auto again = cache->find("/a.html", t0_);
  ASSERT_TRUE(again);
  EXPECT_FALSE((*again)->has_content());
  EXPECT_TRUE((*cache->find("/sub/b.txt", t0_))->size() == 3);
}

// The byte budget bounds entries and contents together. To make room, the
// least recently used contents go first (their files stay cached), whole
// entries only after; the total never exceeds it.
TEST_F(OpenFileCacheTest, TheByteBudgetDropsContentsBeforeEntries) {
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(root_.write("f" + std::to_string(i), std::string(1000, 'x')));
  OpenFileCacheOptions options;
  options.max_entries = 10;
  options.max_bytes = 10 * (OpenFileCache::kEntryBytes + 4) + 2 * 1000 + 100;
  options.content_idle = 0s;  // any content may give way to a newer one
  auto cache = make(options);
  std::shared_ptr<const OpenFile> f10;
  for (int i = 0; i < 20; ++i) {
    const std::string path = "/f" + std::to_string(i);
    const Clock::time_point now = t0_ + std::chrono::milliseconds(i + 1);
    ASSERT_TRUE(cache->find(path, now));
    auto hot = cache->find(path, now);  // asked again: read in
    ASSERT_TRUE(hot);
    EXPECT_TRUE((*hot)->has_content()) << path;
    EXPECT_LE(cache->bytes(), options.max_bytes);
    if (i == 10) f10 = *hot;
  }
  // Ten entries (f10 to f19), the last two with their bytes.
  EXPECT_EQ(cache->size(), 10u);
  EXPECT_EQ(cache->bytes(), 10 * (OpenFileCache::kEntryBytes + 4) + 2 * 1000);
  EXPECT_FALSE(f10->has_content()) << "its content went to make room";
  auto again = cache->find("/f10", t0_ + 100ms);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->get(), f10.get()) << "still cached: a hit, not a miss";
  EXPECT_LE(cache->bytes(), options.max_bytes);
}

// When clients ask for more than the budget holds, the files in memory stay
// there rather than take turns with the others (a read per request); a
// content unused for content_idle gives way.
TEST_F(OpenFileCacheTest, ContentsInUseAreNotSwappedForNewOnes) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(root_.write("f" + std::to_string(i), std::string(1000, 'x')));
  OpenFileCacheOptions options;
  options.max_bytes = 3 * (OpenFileCache::kEntryBytes + 3) + 2 * 1000 + 100;
  auto cache = make(options);
  for (const char* path : {"/f0", "/f1"}) {
    ASSERT_TRUE(cache->find(path, t0_));
    ASSERT_TRUE((*cache->find(path, t0_))->has_content());
  }
  ASSERT_TRUE(cache->find("/f2", t0_));
  EXPECT_FALSE((*cache->find("/f2", t0_ + 1ms))->has_content()) << "no room: f0 and f1 are in use";
  EXPECT_TRUE((*cache->find("/f0", t0_ + 5s))->has_content());
  // f1 has not been asked for in 10 s: it gives way.
  auto f2 = cache->find("/f2", t0_ + 12s);
  ASSERT_TRUE(f2);
  EXPECT_TRUE((*f2)->has_content());
  EXPECT_LE(cache->bytes(), options.max_bytes);
}

TEST_F(OpenFileCacheTest, AChangedFileProvesHotAgainAndIsCountedAnew) {
  auto cache = make();
  ASSERT_TRUE(cache->find("/a.html", t0_));
  ASSERT_TRUE((*cache->find("/a.html", t0_))->has_content());
  const size_t hot = cache->bytes();
  ASSERT_TRUE(root_.write("a.html", "hello, world"));
  auto changed = cache->find("/a.html", t0_ + 2s);
  ASSERT_TRUE(changed);
  EXPECT_FALSE((*changed)->has_content());
  EXPECT_EQ(cache->bytes(), hot - 5);
  auto again = cache->find("/a.html", t0_ + 2s);
  EXPECT_EQ((*again)->content(), "hello, world");
  EXPECT_EQ(cache->bytes(), hot - 5 + 12);
}

TEST_F(OpenFileCacheTest, MissingPathsMayBeLeftOutOfTheCache) {
  auto cache = make();
  EXPECT_EQ(error_of(cache->find("/nope.gz", t0_, /*remember_missing=*/false)), ENOENT);
  EXPECT_EQ(cache->size(), 0u);
  EXPECT_EQ(error_of(cache->find("/nope.gz", t0_)), ENOENT);
  EXPECT_EQ(cache->size(), 1u);
}

TEST_F(OpenFileCacheTest, ConstructorThrowsWhenTheRootCannotBeOpened) {
  EXPECT_THROW(OpenFileCache(root_.at("missing"), {}), std::system_error);
  EXPECT_THROW(OpenFileCache(root_.at("a.html"), {}), std::system_error);
}

}  // namespace
}  // namespace tern::files
