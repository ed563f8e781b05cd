// Logging, on spdlog.
//
// One process-wide logger. By default it writes synchronously to stderr at
// level info, so tests and small programs need no set-up. log::init() switches
// to an asynchronous logger: records go through a bounded queue to a backend
// thread that does the formatting of sinks and all the disk I/O, and when the
// queue is full the oldest record is dropped rather than making a loop wait
// (a web server must keep serving when its disk is slow).
//
// Levels run trace, debug, info, warn, error, critical. The macros check the
// level before any argument is formatted:
//
//   TERN_LOG_INFO("conn {} from {} closed", id, peer);
//
// The level can be set at start-up (Options::level), from the environment
// variable TERN_LOG_LEVEL (which wins over Options::level, so an operator can
// turn on debug output without editing a config file) and at run time with
// set_level(). All functions here may be called from any thread.
#pragma once

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tern::log {

// How much is logged: a record of a level below the logger's is dropped.
enum class Level { trace, debug, info, warn, error, critical, off };

// What init() sets up.
struct Options {
  Level level = Level::info;  // the lowest level written
  // Empty: stderr. Otherwise a file, rotated when it reaches max_file_bytes,
  // keeping max_files old files (name.1.log, name.2.log, ...).
  std::string file;
  std::size_t max_file_bytes = 64 * 1024 * 1024;
  std::size_t max_files = 5;
  // The backend flushes at least this often, and at once for error and above.
  std::chrono::seconds flush_interval{1};
  // Records waiting for the backend; past this the oldest are dropped.
  std::size_t queue_size = 8192;
  bool async = true;  // a backend thread writes the records; false: the logging thread does
  // Read TERN_LOG_LEVEL from the environment (tests turn this off).
  bool use_environment = true;
};

// Replaces the process logger. Throws spdlog::spdlog_ex if the file cannot be
// opened (a start-up error).
void init(const Options& options);

// Writes out everything logged so far, stops the backend thread, and
// reverts to the synchronous stderr logger.
void shutdown();

// Opens the log file again (after logrotate moved it), closing the old
// one; nothing when logging to stderr. Throws spdlog::spdlog_ex if the file
// cannot be opened.
void reopen();

// The lowest level written, from now on; any thread.
void set_level(Level level);
// The lowest level written now.
Level level();

// "trace", "debug", "info", "warn"/"warning", "error", "critical", "off".
std::optional<Level> parse_level(std::string_view name);
std::string_view level_name(Level level);

// Flushes what can be flushed without waiting for a stuck backend. Used by
// the assertion handler right before abort().
void flush_for_abort();

// Records dropped because the async queue was full, since the process began
// (over every init()).
std::size_t dropped_records();

namespace detail {
// Swapped by init() and shutdown() while other threads log: atomic, and the
// loggers it ever pointed to are never destroyed (see log.cc).
extern std::atomic<spdlog::logger*> g_logger;
}  // namespace detail

}  // namespace tern::log

#define TERN_LOG_AT(lvl, ...)                                                        \
  do {                                                                               \
    ::spdlog::logger* tern_log_logger_ =                                             \
        ::tern::log::detail::g_logger.load(::std::memory_order_acquire);             \
    if (tern_log_logger_->should_log(lvl))                                           \
      tern_log_logger_->log(::spdlog::source_loc{__FILE__, __LINE__, __func__}, lvl, \
                            __VA_ARGS__);                                            \
  } while (0)

#define TERN_LOG_TRACE(...) TERN_LOG_AT(::spdlog::level::trace, __VA_ARGS__)
#define TERN_LOG_DEBUG(...) TERN_LOG_AT(::spdlog::level::debug, __VA_ARGS__)
#define TERN_LOG_INFO(...) TERN_LOG_AT(::spdlog::level::info, __VA_ARGS__)
#define TERN_LOG_WARN(...) TERN_LOG_AT(::spdlog::level::warn, __VA_ARGS__)
#define TERN_LOG_ERROR(...) TERN_LOG_AT(::spdlog::level::err, __VA_ARGS__)
#define TERN_LOG_CRITICAL(...) TERN_LOG_AT(::spdlog::level::critical, __VA_ARGS__)

// Logs at most once per second per call site (per thread): for conditions that
// can repeat thousands of times a second, such as running out of descriptors.
#define TERN_LOG_EVERY_SECOND(lvl, ...)                                               \
  do {                                                                                \
    static thread_local ::std::chrono::steady_clock::time_point tern_log_last_{};     \
    auto tern_log_now_ = ::std::chrono::steady_clock::now();                          \
    if (tern_log_now_ - tern_log_last_ >= ::std::chrono::seconds(1)) {                \
      tern_log_last_ = tern_log_now_;                                                 \
      TERN_LOG_AT(lvl, __VA_ARGS__);                                                  \
    }                                                                                 \
  } while (0)
