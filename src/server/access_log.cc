#include "server/access_log.h"

#include <spdlog/async.h>
#include <spdlog/spdlog.h>

#include <ctime>

#include "base/file_sink.h"
#include "http/request.h"
#include "http/response_writer.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"

namespace tern::server {
namespace {

// "[22/Nov/2026:11:02:03 +0000]", formatted once a second per thread.
std::string_view local_time(int64_t seconds) {
  thread_local int64_t cached_second = -1;
  thread_local char text[40];
  thread_local size_t length = 0;
  if (seconds != cached_second) {
    cached_second = seconds;
    time_t t = static_cast<time_t>(seconds);
    tm local{};
    localtime_r(&t, &local);
    length = std::strftime(text, sizeof text, "[%d/%b/%Y:%H:%M:%S %z]", &local);
  }
  return {text, length};
}

// Quotes a field value for the log: '"' and '\\' and control bytes escaped
// as \xHH, so a hostile User-Agent cannot forge a log line.
void append_escaped(fmt::memory_buffer& out, std::string_view value) {
  if (value.empty()) return out.push_back('-');
  for (unsigned char ch : value) {
    if (ch < 0x20 || ch == '"' || ch == '\\' || ch >= 0x7f) {
      fmt::format_to(std::back_inserter(out), "\\x{:02X}", ch);
    } else {
      out.push_back(static_cast<char>(ch));
    }
  }
}

}  // namespace

AccessLog::~AccessLog() {
  current_.store(nullptr, std::memory_order_release);
  if (logger_) logger_->flush();
  // Drains the queue and joins the backend thread; only then does the logger go.
  pool_.reset();
  logger_.reset();
}

void AccessLog::open(const std::string& path) {
  std::lock_guard lock(mu_);
  path_ = path;
  if (path.empty()) {
    current_.store(nullptr, std::memory_order_release);
    if (file_) file_->close();
    return;
  }
  if (!logger_) {
    pool_ = std::make_shared<spdlog::details::thread_pool>(8192, 1);
    file_ = std::make_shared<log::FileSink>(path);
    logger_ = std::make_shared<spdlog::async_logger>("access", file_, pool_,
                                                     spdlog::async_overflow_policy::overrun_oldest);
    logger_->set_pattern("%v");
    logger_->set_level(spdlog::level::info);
    logger_->flush_on(spdlog::level::info);
  } else {
    file_->reopen(path, 0, 0);
  }
  current_.store(logger_.get(), std::memory_order_release);
}

void AccessLog::reopen() {
  std::lock_guard lock(mu_);
  if (path_.empty() || !file_) return;
  file_->reopen();
}

void AccessLog::log(const http::Request& request, const net::TcpConnection& conn,
                    const http::ResponseWriter& writer) {
  spdlog::logger* logger = current_.load(std::memory_order_acquire);
  if (logger == nullptr) return;
  fmt::memory_buffer line;
  fmt::format_to(std::back_inserter(line), "{} - - {} \"", conn.peer_address().to_ip(),
                 local_time(conn.loop()->clock().wall_seconds()));
  if (request.method_text().empty()) {
    line.push_back('-');
  } else {
    append_escaped(line, request.method_text());
    line.push_back(' ');
    append_escaped(line, request.target());
    line.push_back(' ');
    line.append(http::version_name(request.version()));
  }
  fmt::format_to(std::back_inserter(line), "\" {} {} \"", writer.status(), writer.body_bytes());
  append_escaped(line, request.header("Referer"));
  line.append(std::string_view("\" \""));
  append_escaped(line, request.header("User-Agent"));
  line.push_back('"');
  logger->info(std::string_view(line.data(), line.size()));
}

}  // namespace tern::server
