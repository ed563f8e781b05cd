#include "server/observability/access_log.h"

#include <spdlog/async.h>
#include <spdlog/spdlog.h>

#include <optional>
#include <stdexcept>

#include "base/file_sink.h"
#include "http/request.h"
#include "http/response_writer.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"
#include "server/observability/access_log_format.h"

namespace tern::server {

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

uint64_t AccessLog::dropped() const {
  std::lock_guard lock(mu_);
  return pool_ ? pool_->overrun_counter() : 0;
}

void AccessLog::reopen() {
  std::lock_guard lock(mu_);
  if (path_.empty() || !file_) return;
  file_->reopen();
}

void AccessLog::set_format(const std::string& format) {
  std::lock_guard lock(mu_);
  if (!formats_.empty() && formats_.back().first == format) return;
  std::string error;
  std::optional<AccessLogFormat> parsed = AccessLogFormat::parse(format, &error);
  if (!parsed) throw std::invalid_argument("access_log_format: " + error);
  formats_.emplace_back(format, std::make_unique<const AccessLogFormat>(std::move(*parsed)));
  format_.store(formats_.back().second.get(), std::memory_order_release);
}

void AccessLog::log(const http::Request& request, const net::TcpConnection& conn,
                    const http::ResponseWriter& writer) {
  spdlog::logger* logger = current_.load(std::memory_order_acquire);
  if (logger == nullptr) return;
  const AccessLogFormat* format = format_.load(std::memory_order_acquire);
  if (format == nullptr) return;
  fmt::memory_buffer line;
  const net::EventLoop* loop = conn.loop();
  format->append(line, AccessLogEntry{request, conn, writer, static_cast<int64_t>(loop->clock().now_ms()),
                                      loop->clock().wall_seconds()});
  logger->info(std::string_view(line.data(), line.size()));
}

}  // namespace tern::server
