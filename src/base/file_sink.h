// FileSink: an spdlog sink writing to a file that it can reopen, move to
// another path, or close while loggers still hold it. A log file has one
// descriptor for the life of the process, whatever SIGUSR1 (after
// logrotate moved the file) and SIGHUP (another path) ask: reopening closes
// the old one at once, so a rotated-away file is not kept alive, and a
// retired logger's file is closed rather than left open with it.
//
// With max_bytes > 0 the file rotates by size, as spdlog's rotating sink
// does: name.log -> name.1.log -> ... -> name.N.log, N up to max_files.
//
// Thread-safe: the logger's backend thread writes, the main thread reopens;
// both under the sink's mutex.
#pragma once

#include <spdlog/details/file_helper.h>
#include <spdlog/sinks/base_sink.h>

#include <cstddef>
#include <mutex>
#include <string>

namespace tern::log {

// An spdlog sink that appends to a file, rotates it by size and opens it
// again on request (after logrotate moved it).
class FileSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  // Opens `path` for appending. Throws spdlog::spdlog_ex if it cannot.
  FileSink(const std::string& path, size_t max_bytes = 0, size_t max_files = 0);

  // Opens the same path again (a new file if it was moved). Throws
  // spdlog::spdlog_ex if it cannot; the sink is closed then.
  void reopen();
  // Opens another path; the old file is closed. Throws as reopen().
  void reopen(const std::string& path, size_t max_bytes, size_t max_files);
  // Closes the file; records from now on are dropped until a reopen.
  void close();
  bool is_open();  // whether records are written (not after close())

 protected:
  // spdlog's: writes one record (rotating first when it would pass the
  // size), and writes out what the file holds buffered.
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override;

 private:
  void rotate();

  spdlog::details::file_helper file_;
  std::string path_;
  size_t max_bytes_ = 0;
  size_t max_files_ = 0;
  size_t size_ = 0;
  bool open_ = false;
};

}  // namespace tern::log
