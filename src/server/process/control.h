// Control of a running tern from the command line, as nginx -s:
//
//   tern -s reload   SIGHUP   re-read the config file and apply it
//   tern -s reopen   SIGUSR1  reopen the log files (after logrotate)
//   tern -s stop     SIGTERM  stop: in-flight responses get shutdown_timeout
//   tern -s quit     SIGQUIT  stop when every in-flight response is done,
//                             however long that takes
//
// The running process is the one whose id the pid file holds (`pid_file`
// in the config, or --pid-file), written once its ports are bound and
// removed at exit when it still holds this process's id. During a binary
// upgrade (server/upgrade.h) the old process's id is in PID_FILE.oldbin.
#pragma once

#include <optional>
#include <string>

namespace tern::server {

// The signal a -s name stands for, or nullopt.
std::optional<int> control_signal(const std::string& name);

// Sends `name`'s signal to the process the pid file names, after checking
// that it is a running tern. Returns an empty string, or what went wrong
// in one line.
std::string send_control_signal(const std::string& pid_file, const std::string& name);

// The pid file of the running process: written by the constructor (throws
// std::runtime_error naming the file when it cannot), removed by the
// destructor when it still holds this process's id. An empty path does
// nothing.
class PidFile {
 public:
  explicit PidFile(std::string path);
  ~PidFile();
  PidFile(const PidFile&) = delete;
  PidFile& operator=(const PidFile&) = delete;

  // A binary upgrade: the file moves to PATH.oldbin, leaving PATH to the
  // new process (false, and a log line, when it cannot); move_back() when
  // the new process is gone.
  bool move_aside();
  void move_back();

  // Where this process's id is now: PATH, or PATH.oldbin.
  const std::string& path() const { return current_; }

 private:
  std::string path_;
  std::string current_;
};

}  // namespace tern::server
