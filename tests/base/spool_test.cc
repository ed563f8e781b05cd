#include "base/spool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "support/temp_dir.h"

namespace tern {
namespace {

// Descriptors open in this process that point at files in `dir` (deleted
// ones included): what a leaked temp file would show.
int open_files_in(const std::string& dir) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(entry.path(), ec);
    if (!ec && target.string().starts_with(dir)) ++count;
  }
  return count;
}

TEST(Spool, KeepsSmallContentInMemory) {
  testing::TempDir dir;
  Spool spool;
  spool.configure(16, dir.path());
  ASSERT_TRUE(spool.append("hello "));
  ASSERT_TRUE(spool.append("world"));
  EXPECT_FALSE(spool.in_file());
  EXPECT_EQ(spool.size(), 11u);
  auto all = spool.view();
  ASSERT_TRUE(all);
  EXPECT_EQ(*all, "hello world");
  EXPECT_EQ(open_files_in(dir.path()), 0);
}

TEST(Spool, MovesToAnUnnamedFilePastTheLimit) {
  testing::TempDir dir;
  Spool spool;
  spool.configure(8, dir.path());
  ASSERT_TRUE(spool.append("12345"));
  ASSERT_TRUE(spool.append("67890"));
  EXPECT_TRUE(spool.in_file());
  ASSERT_TRUE(spool.append(std::string(100000, 'x')));
  EXPECT_EQ(spool.size(), 100010u);
  auto all = spool.view();
  ASSERT_TRUE(all);
  EXPECT_EQ(all->substr(0, 12), "1234567890xx");
  EXPECT_EQ(all->size(), 100010u);
  // Nothing named in the directory: the file has no name.
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  EXPECT_EQ(open_files_in(dir.path()), 1);
  spool.clear();
  EXPECT_EQ(open_files_in(dir.path()), 0);
  EXPECT_EQ(spool.size(), 0u);
  EXPECT_FALSE(spool.in_file());
}

TEST(Spool, ReadsPiecesFromMemoryAndFromTheFile) {
  testing::TempDir dir;
  std::string expected;
  for (int i = 0; i < 1000; ++i) expected += std::to_string(i) + ",";
  for (size_t limit : {size_t{0}, size_t{100}, size_t{1} << 20}) {
    Spool spool;
    spool.configure(limit, dir.path());
    for (size_t at = 0; at < expected.size(); at += 37) {
      ASSERT_TRUE(spool.append(std::string_view(expected).substr(at, 37)));
    }
    std::string scratch, got;
    for (uint64_t offset = 0;;) {
      auto piece = spool.read(offset, 101, &scratch);
      ASSERT_TRUE(piece);
      if (piece->empty()) break;
      got.append(*piece);
      offset += piece->size();
    }
    EXPECT_EQ(got, expected) << "limit " << limit;
    EXPECT_EQ(spool.in_file(), limit < expected.size());
  }
}

TEST(Spool, AppendAfterViewKeepsEverything) {
  testing::TempDir dir;
  Spool spool;
  spool.configure(4, dir.path());
  ASSERT_TRUE(spool.append("abcdef"));
  ASSERT_TRUE(spool.view());
  ASSERT_TRUE(spool.append("ghi"));
  auto all = spool.view();
  ASSERT_TRUE(all);
  EXPECT_EQ(*all, "abcdefghi");
}

TEST(Spool, ReportsADirectoryItCannotWriteTo) {
  Spool spool;
  spool.configure(4, "/nonexistent/tern-spool-test");
  ASSERT_TRUE(spool.append("abc"));
  auto result = spool.append("defgh");
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ENOENT);
  // What memory held is still there.
  EXPECT_EQ(spool.size(), 3u);
  EXPECT_EQ(*spool.view(), "abc");
}

TEST(Spool, MovesWithItsFile) {
  testing::TempDir dir;
  Spool a;
  a.configure(2, dir.path());
  ASSERT_TRUE(a.append("spooled"));
  Spool b(std::move(a));
  EXPECT_EQ(*b.view(), "spooled");
  EXPECT_EQ(open_files_in(dir.path()), 1);
  b = Spool();
  EXPECT_EQ(open_files_in(dir.path()), 0);
}

}  // namespace
}  // namespace tern
