#include "base/log.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace tern::log {
namespace {

namespace fs = std::filesystem;

constexpr Level kAllLevels[] = {Level::trace, Level::debug,    Level::info, Level::warn,
                                Level::error, Level::critical, Level::off};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// shutdown() does not wait for the asynchronous backend (see the disabled
// test at the end), so tests that only need the records to reach the file
// wait for them, up to a generous deadline, instead of reading at once.
bool file_eventually_contains(const fs::path& path, const std::string& needle) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (read_file(path).find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

size_t count_occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

// Restores the process logger and level whatever a test did, and gives each
// test its own empty directory for log files.
class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_level_ = level();
    std::string pattern = (fs::path(::testing::TempDir()) / "tern_log_test_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    ::unsetenv("TERN_LOG_LEVEL");
  }
  void TearDown() override {
    shutdown();
    set_level(saved_level_);
    ::unsetenv("TERN_LOG_LEVEL");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::vector<fs::path> log_files() const {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir_)) files.push_back(entry.path());
    return files;
  }

  Level saved_level_ = Level::info;
  fs::path dir_;
};

TEST(LogLevel, NameAndParseRoundTripForEveryLevel) {
  for (Level l : kAllLevels) {
    auto parsed = parse_level(level_name(l));
    ASSERT_TRUE(parsed.has_value()) << level_name(l);
    EXPECT_EQ(*parsed, l) << level_name(l);
  }
}

TEST(LogLevel, NamesAreTheDocumentedSpellings) {
  EXPECT_EQ(level_name(Level::trace), "trace");
  EXPECT_EQ(level_name(Level::warn), "warn");
  EXPECT_EQ(level_name(Level::critical), "critical");
  EXPECT_EQ(level_name(Level::off), "off");
}

TEST(LogLevel, ParseAcceptsWarningAsAliasForWarn) {
  EXPECT_EQ(parse_level("warning"), Level::warn);
  EXPECT_EQ(parse_level("warn"), Level::warn);
}

TEST(LogLevel, ParseRejectsUnknownNames) {
  EXPECT_FALSE(parse_level("").has_value());
  EXPECT_FALSE(parse_level("verbose").has_value());
  EXPECT_FALSE(parse_level("inf").has_value());
  EXPECT_FALSE(parse_level("info ").has_value());
}

TEST_F(LogTest, SetLevelIsReportedByLevel) {
  for (Level l : kAllLevels) {
    set_level(l);
    EXPECT_EQ(level(), l) << level_name(l);
  }
}

TEST_F(LogTest, DisabledLevelDoesNotEvaluateArguments) {
  int evaluations = 0;
  set_level(Level::warn);
  TERN_LOG_TRACE("{}", ++evaluations);
  TERN_LOG_DEBUG("{}", ++evaluations);
  TERN_LOG_INFO("{}", [&] { return ++evaluations; }());
  EXPECT_EQ(evaluations, 0);

  set_level(Level::off);
  TERN_LOG_CRITICAL("{}", ++evaluations);
  TERN_LOG_ERROR("{}", ++evaluations);
  EXPECT_EQ(evaluations, 0);
}

TEST_F(LogTest, EnabledLevelEvaluatesArgumentsOnceAndWritesTheRecord) {
  const fs::path file = dir_ / "enabled.log";
  init(Options{.level = Level::debug, .file = file.string(), .async = true,
               .use_environment = false});
  int evaluations = 0;
  TERN_LOG_DEBUG("debug record {}", ++evaluations);
  TERN_LOG_TRACE("trace record {}", ++evaluations);  // below debug: skipped
  EXPECT_EQ(evaluations, 1);
  TERN_LOG_INFO("last record");
  shutdown();

  ASSERT_TRUE(file_eventually_contains(file, "last record"));
  const std::string text = read_file(file);
  EXPECT_NE(text.find("debug record 1"), std::string::npos) << text;
  EXPECT_EQ(text.find("trace record"), std::string::npos) << text;
}

TEST_F(LogTest, AsyncFileLoggerWritesEveryRecordInOrder) {
  const fs::path file = dir_ / "async.log";
  init(Options{.level = Level::info, .file = file.string(), .async = true,
               .use_environment = false});
  EXPECT_EQ(level(), Level::info);
  constexpr int kRecords = 2000;
  for (int i = 0; i < kRecords; ++i) TERN_LOG_INFO("async record {:05}", i);
  TERN_LOG_DEBUG("debug is filtered");
  EXPECT_EQ(dropped_records(), 0u);
  shutdown();

  ASSERT_TRUE(file_eventually_contains(file, "async record 01999"));
  const std::string text = read_file(file);
  EXPECT_EQ(count_occurrences(text, "async record "), static_cast<size_t>(kRecords));
  EXPECT_LT(text.find("async record 00000"), text.find("async record 01000"));
  EXPECT_LT(text.find("async record 01000"), text.find("async record 01999"));
  EXPECT_EQ(text.find("debug is filtered"), std::string::npos);
}

TEST_F(LogTest, RotationKeepsAtMostMaxFilesPlusTheActiveFile) {
  const fs::path file = dir_ / "rotating.log";
  constexpr size_t kMaxBytes = 2048;
  init(Options{.level = Level::info, .file = file.string(), .max_file_bytes = kMaxBytes,
               .max_files = 2, .async = true, .use_environment = false});
  // About 100 bytes a record with the prefix: roughly 25 files' worth.
  constexpr int kRecords = 500;
  for (int i = 0; i < kRecords; ++i) TERN_LOG_INFO("rotation record {:05} {:>40}", i, "x");
  shutdown();
  // Once the last record is visible every rotation has happened.
  ASSERT_TRUE(file_eventually_contains(file, "rotation record 00499"));

  const auto files = log_files();
  EXPECT_EQ(files.size(), 3u);  // rotating.log, rotating.1.log, rotating.2.log
  for (const auto& f : files) EXPECT_LE(fs::file_size(f), kMaxBytes) << f;
  EXPECT_TRUE(fs::exists(dir_ / "rotating.log"));
  EXPECT_TRUE(fs::exists(dir_ / "rotating.1.log"));
  EXPECT_TRUE(fs::exists(dir_ / "rotating.2.log"));
  EXPECT_FALSE(fs::exists(dir_ / "rotating.3.log"));

  // The newest record is in the active file; the oldest rotated away.
  std::string all;
  for (const auto& f : files) all += read_file(f);
  EXPECT_EQ(all.find("rotation record 00000"), std::string::npos);
}

TEST_F(LogTest, EnvironmentLevelOverridesOptionsWhenEnabled) {
  ::setenv("TERN_LOG_LEVEL", "debug", 1);
  init(Options{.level = Level::error, .file = (dir_ / "env.log").string(), .async = true,
               .use_environment = true});
  EXPECT_EQ(level(), Level::debug);
}

TEST_F(LogTest, EnvironmentLevelAcceptsWarningAlias) {
  ::setenv("TERN_LOG_LEVEL", "warning", 1);
  init(Options{.level = Level::trace, .file = (dir_ / "env.log").string(), .async = true,
               .use_environment = true});
  EXPECT_EQ(level(), Level::warn);
}

TEST_F(LogTest, EnvironmentLevelIsIgnoredWhenDisabled) {
  ::setenv("TERN_LOG_LEVEL", "debug", 1);
  init(Options{.level = Level::error, .file = (dir_ / "env.log").string(), .async = true,
               .use_environment = false});
  EXPECT_EQ(level(), Level::error);
}

TEST_F(LogTest, UnparsableEnvironmentLevelFallsBackToOptions) {
  ::setenv("TERN_LOG_LEVEL", "loud", 1);
  init(Options{.level = Level::warn, .file = (dir_ / "env.log").string(), .async = true,
               .use_environment = true});
  EXPECT_EQ(level(), Level::warn);
}

TEST_F(LogTest, ShutdownKeepsTheLevelForTheStderrLogger) {
  init(Options{.level = Level::error, .file = (dir_ / "keep.log").string(), .async = true,
               .use_environment = false});
  shutdown();
  EXPECT_EQ(level(), Level::error);
}

// BUG (src/base/log.cc, shutdown()): the header promises that after
// shutdown() "the logger reverts to stderr", but shutdown() returns early when
// the logger is synchronous (`if (!s.pool) return;`), so a synchronous file
// logger stays installed. Disabled until fixed.
TEST_F(LogTest, ShutdownRevertsSynchronousFileLoggerToStderr) {
  const fs::path file = dir_ / "sync.log";
  init(Options{.level = Level::info, .file = file.string(), .async = false,
               .use_environment = false});
  TERN_LOG_INFO("before shutdown");
  shutdown();
  TERN_LOG_INFO("after shutdown");
  shutdown();  // flushes whichever logger is now installed
  const std::string text = read_file(file);
  EXPECT_NE(text.find("before shutdown"), std::string::npos);
  EXPECT_EQ(text.find("after shutdown"), std::string::npos) << "shutdown() kept the file logger";
}

// BUG (src/base/log.cc, shutdown()): the header says shutdown() "flushes and
// stops the backend thread", but for an async logger s.logger->flush() only
// posts a flush request to the spdlog thread pool (spdlog 1.10
// async_logger::flush_ does not wait), and the pool is moved to `retired`, so
// its thread is neither stopped nor joined. Records logged just before
// shutdown() are therefore not yet in the file when it returns.
// Disabled until fixed.
TEST_F(LogTest, ShutdownWaitsUntilAsyncRecordsAreInTheFile) {
  const fs::path file = dir_ / "strict.log";
  init(Options{.level = Level::info, .file = file.string(), .async = true,
               .use_environment = false});
  for (int i = 0; i < 100; ++i) TERN_LOG_INFO("strict record {:03}", i);
  shutdown();
  const std::string text = read_file(file);  // no waiting: shutdown() flushed
  EXPECT_EQ(count_occurrences(text, "strict record "), 100u);
}

// BUG (src/base/log.h, detail::g_logger): the header says every function may
// be called from any thread, but g_logger is a plain pointer that init() and
// shutdown() write (under State::mu) while the TERN_LOG_* macros read it with
// no synchronization, so logging on one thread while another re-initializes
// is a data race (ThreadSanitizer reports it). It should be a
// std::atomic<spdlog::logger*> (release store, acquire load). This test only
// fails under the tsan preset. Disabled until fixed.
TEST_F(LogTest, LoggingWhileAnotherThreadReinitializesIsRaceFree) {
  std::atomic<bool> stop{false};
  std::thread logger_thread([&] {
    while (!stop.load(std::memory_order_relaxed)) TERN_LOG_TRACE("never formatted {}", 1);
  });
  for (int i = 0; i < 3; ++i) {
    init(Options{.level = Level::info, .file = (dir_ / "race.log").string(), .async = true,
                 .use_environment = false});
    shutdown();
  }
  stop = true;
  logger_thread.join();
}

}  // namespace
}  // namespace tern::log
