#include "base/log.h"

#include "base/file_sink.h"

#include <spdlog/async.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <array>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tern::log {
namespace {

// The fallback logger: synchronous, stderr, created before main() runs so
// that g_logger is never null.
std::shared_ptr<spdlog::logger> make_stderr_logger() {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("tern", sink);
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ [%t] %v");
  logger->set_level(spdlog::level::info);
  return logger;
}

struct State {
  std::mutex mu;
  std::shared_ptr<spdlog::logger> logger = make_stderr_logger();
  std::shared_ptr<spdlog::details::thread_pool> pool;  // set while async
  std::size_t dropped_before = 0;  // by the pools init() replaced
  std::shared_ptr<FileSink> file;  // the current logger's, when it writes to a file
  bool custom = false;  // init() replaced the built-in stderr logger
  // Loggers replaced by init() or shutdown(). Another thread may have loaded
  // g_logger just before the swap and still be inside a call on it, so the
  // old objects are kept, not destroyed. init() runs a few times a process.
  std::vector<std::shared_ptr<spdlog::logger>> retired;
};

State& state() {
  static State* s = new State;  // never destroyed: logging works during exit
  return *s;
}

spdlog::level::level_enum to_spdlog(Level level) {
  return static_cast<spdlog::level::level_enum>(static_cast<int>(level));
}

constexpr std::array<std::string_view, 7> kNames = {"trace", "debug", "info",    "warn",
                                                     "error", "critical", "off"};

}  // namespace

namespace detail {
std::atomic<spdlog::logger*> g_logger{state().logger.get()};
}  // namespace detail

void init(const Options& options) {
  State& s = state();
  std::lock_guard lock(s.mu);

  spdlog::sink_ptr sink;
  std::shared_ptr<FileSink> file;
  if (options.file.empty()) {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  } else {
    file = std::make_shared<FileSink>(options.file, options.max_file_bytes, options.max_files);
    sink = file;
  }

  std::shared_ptr<spdlog::logger> logger;
  std::shared_ptr<spdlog::details::thread_pool> pool;
  if (options.async) {
    pool = std::make_shared<spdlog::details::thread_pool>(options.queue_size, 1);
    logger = std::make_shared<spdlog::async_logger>(
        "tern", sink, pool, spdlog::async_overflow_policy::overrun_oldest);
  } else {
    logger = std::make_shared<spdlog::logger>("tern", sink);
  }
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ [%t] %v");

  Level level = options.level;
  if (options.use_environment) {
    if (const char* env = std::getenv("TERN_LOG_LEVEL")) {
      if (auto parsed = parse_level(env)) level = *parsed;
    }
  }
  logger->set_level(to_spdlog(level));
  logger->flush_on(spdlog::level::err);

  // Swap first, then retire: another thread may have loaded the old pointer
  // a moment ago, so the old logger object is kept (never destroyed), while
  // its backend, if any, is drained and joined by dropping the pool.
  detail::g_logger.store(logger.get(), std::memory_order_release);
  s.logger->flush();
  s.retired.push_back(s.logger);
  s.logger = logger;
  s.custom = true;
  if (s.pool) s.dropped_before += s.pool->overrun_counter();
  s.pool = pool;  // the previous pool, if any, drains and stops here
  // Drained: the old file can close now (a retired logger keeps only the
  // object, and drops what a late caller still gives it).
  if (s.file) s.file->close();
  s.file = std::move(file);

  // spdlog's periodic flusher walks its registry, so the logger is registered.
  spdlog::drop("tern");
  spdlog::register_logger(logger);
  spdlog::flush_every(options.flush_interval);
}

void shutdown() {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (!s.custom) return;
  // New records go to stderr from here on; the old logger stays allocated
  // for threads that loaded it a moment ago.
  spdlog::drop("tern");
  auto fallback = make_stderr_logger();
  fallback->set_level(s.logger->level());
  detail::g_logger.store(fallback.get(), std::memory_order_release);
  s.logger->flush();
  s.retired.push_back(s.logger);
  s.logger = fallback;
  s.custom = false;
  // Destroying the pool drains its queue in order and joins its thread, so
  // every record logged before this point is written when we return.
  if (s.pool) s.dropped_before += s.pool->overrun_counter();
  s.pool.reset();
  if (s.file) s.file->close();
  s.file.reset();
}

void reopen() {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.file) s.file->reopen();
}

void set_level(Level level) {
  std::lock_guard lock(state().mu);
  state().logger->set_level(to_spdlog(level));
}

Level level() {
  return static_cast<Level>(static_cast<int>(detail::g_logger.load(std::memory_order_acquire)->level()));
}

std::optional<Level> parse_level(std::string_view name) {
  if (name == "warning") return Level::warn;
  if (name == "err") return Level::error;
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<Level>(i);
  }
  return std::nullopt;
}

std::string_view level_name(Level level) { return kNames[static_cast<std::size_t>(level)]; }

void flush_for_abort() {
  // flush() on an async logger only enqueues a request; give the backend a
  // moment to write what it holds. Never block for long: we are dying.
  detail::g_logger.load(std::memory_order_acquire)->flush();
  State& s = state();
  if (s.pool) {
    for (int i = 0; i < 50 && s.pool->queue_size() > 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
}

std::size_t dropped_records() {
  State& s = state();
  std::lock_guard lock(s.mu);
  return s.dropped_before + (s.pool ? s.pool->overrun_counter() : 0);
}

}  // namespace tern::log
