// AccessLog: one line per response, in the Combined Log Format unless the
// config says otherwise (server/access_log_format.h), written by a
// background thread (spdlog's asynchronous logger) so loops never wait on
// disk:
//
//   127.0.0.1 - - [22/Nov/2026:11:02:03 +0000] "GET / HTTP/1.1" 200 1024 "-" "curl/7.88.1"
//
// reopen() (SIGUSR1, after logrotate moved the file) and open() with another
// path (SIGHUP) reopen the one file the log holds (log::FileSink): the old
// descriptor closes at once, and records still queued go to the new file.
//
// Owned by Server. log() may be called from any loop thread; open() and
// reopen() from the main thread.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/observability/access_log_format.h"

namespace spdlog {
class logger;
namespace details {
class thread_pool;
}  // namespace details
}  // namespace spdlog

namespace tern::log {
class FileSink;
}  // namespace tern::log

namespace tern::net {
class TcpConnection;
}  // namespace tern::net

namespace tern::http {
class Request;
class ResponseWriter;
}  // namespace tern::http

namespace tern::server {

class AccessLog {
 public:
  AccessLog() = default;
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  // Starts writing to `path` (appending); empty turns logging off. Throws
  // spdlog::spdlog_ex if the file cannot be opened.
  void open(const std::string& path);
  // Opens the same path again.
  void reopen();
  bool enabled() const { return current_.load(std::memory_order_acquire) != nullptr; }

  // Lines from now on follow `format` (server/access_log_format.h),
  // which the config has checked. Main thread.
  void set_format(const std::string& format);

  void log(const http::Request& request, const net::TcpConnection& conn,
           const http::ResponseWriter& writer);
  // Lines dropped because the writer thread fell behind (metrics). Any thread.
  uint64_t dropped() const;

 private:
  mutable std::mutex mu_;  // open/reopen
  std::string path_;
  // Our own backend thread (not spdlog's global one), so that the destructor
  // can drain and join it before the logger it writes for is freed.
  std::shared_ptr<spdlog::details::thread_pool> pool_;
  std::shared_ptr<log::FileSink> file_;
  std::shared_ptr<spdlog::logger> logger_;  // made on the first open, kept
  std::atomic<spdlog::logger*> current_{nullptr};  // logger_, or null when off
  // Every format set (a reload may set one while loops write with the one
  // before), the last one current; a few hundred bytes each.
  std::vector<std::pair<std::string, std::unique_ptr<const AccessLogFormat>>> formats_;
  std::atomic<const AccessLogFormat*> format_{nullptr};
};

}  // namespace tern::server
