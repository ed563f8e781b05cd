#include "base/file_sink.h"

#include <spdlog/sinks/rotating_file_sink.h>

#include <cstdio>

namespace tern::log {

FileSink::FileSink(const std::string& path, size_t max_bytes, size_t max_files) {
  reopen(path, max_bytes, max_files);
}

void FileSink::reopen() {
  std::lock_guard lock(mutex_);
  file_.close();
  open_ = false;
  file_.open(path_, false);
  size_ = file_.size();
  open_ = true;
}

void FileSink::reopen(const std::string& path, size_t max_bytes, size_t max_files) {
  std::lock_guard lock(mutex_);
  file_.close();
  open_ = false;
  path_ = path;
  max_bytes_ = max_bytes;
  max_files_ = max_files;
  file_.open(path_, false);
  size_ = file_.size();
  open_ = true;
}

void FileSink::close() {
  std::lock_guard lock(mutex_);
  file_.close();
  open_ = false;
}

bool FileSink::is_open() {
  std::lock_guard lock(mutex_);
  return open_;
}

void FileSink::sink_it_(const spdlog::details::log_msg& msg) {
  if (!open_) return;
  spdlog::memory_buf_t formatted;
  formatter_->format(msg, formatted);
  if (max_bytes_ > 0 && size_ > 0 && size_ + formatted.size() > max_bytes_) rotate();
  if (!open_) return;
  file_.write(formatted);
  size_ += formatted.size();
}

void FileSink::flush_() {
  if (open_) file_.flush();
}

// name.log -> name.1.log -> ... -> name.<max_files>.log, then a new name.log.
void FileSink::rotate() {
  using spdlog::sinks::rotating_file_sink_st;
  file_.close();
  for (size_t i = max_files_; i > 0; --i) {
    const std::string from = i == 1 ? path_ : rotating_file_sink_st::calc_filename(path_, i - 1);
    const std::string to = rotating_file_sink_st::calc_filename(path_, i);
    std::remove(to.c_str());
    std::rename(from.c_str(), to.c_str());
  }
  try {
    file_.open(path_, max_files_ == 0);  // nothing kept: start the file again
    size_ = file_.size();
  } catch (const spdlog::spdlog_ex&) {
    open_ = false;  // a later reopen() may bring it back
  }
}

}  // namespace tern::log
