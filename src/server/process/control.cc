#include "server/process/control.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "base/log.h"

namespace tern::server {
namespace {

// The pid the file holds, or 0 with `*error` set.
pid_t read_pid(const std::string& path, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot read pid file " + path + ": " + std::strerror(errno) + " (is tern running?)";
    return 0;
  }
  std::string text;
  std::getline(in, text);
  long pid = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), pid);
  if (ec != std::errc() || end != text.data() + text.size() || pid <= 1) {
    *error = "pid file " + path + " holds \"" + text + "\", not a process id";
    return 0;
  }
  return static_cast<pid_t>(pid);
}

}  // namespace

std::optional<int> control_signal(const std::string& name) {
  if (name == "reload") return SIGHUP;
  if (name == "reopen") return SIGUSR1;
  if (name == "stop") return SIGTERM;
  if (name == "quit") return SIGQUIT;
  return std::nullopt;
}

std::string send_control_signal(const std::string& pid_file, const std::string& name) {
  std::optional<int> signo = control_signal(name);
  if (!signo) return "\"" + name + "\" is not reload, reopen, stop or quit";
  std::string error;
  pid_t pid = read_pid(pid_file, &error);
  if (pid == 0) return error;
  // A pid file left by a tern that died may name another program by now.
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string command;
  if (!comm || !std::getline(comm, command)) {
    return "no process " + std::to_string(pid) + " (pid file " + pid_file + " is stale)";
  }
  if (!command.starts_with("tern")) {
    return "process " + std::to_string(pid) + " is " + command + ", not tern (pid file " + pid_file + " is stale)";
  }
  if (::kill(pid, *signo) != 0) return "cannot signal process " + std::to_string(pid) + ": " + std::strerror(errno);
  return {};
}

PidFile::PidFile(std::string path) : path_(std::move(path)), current_(path_) {
  if (path_.empty()) return;
  const std::string text = std::to_string(::getpid()) + "\n";
  // Written whole under a temporary name, then renamed: `tern -s` never
  // reads half a number.
  const std::string temp = path_ + ".tmp";
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("pid_file " + path_ + ": " + std::strerror(errno));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int saved = errno;
  ::close(fd);
  if (!written || ::rename(temp.c_str(), path_.c_str()) != 0) {
    const int err = written ? errno : saved;
    ::unlink(temp.c_str());
    throw std::runtime_error("pid_file " + path_ + ": " + std::strerror(err));
  }
}

PidFile::~PidFile() {
  if (current_.empty()) return;
  std::string error;
  // A newer tern (a binary upgrade) may have written its own id since.
  if (read_pid(current_, &error) != ::getpid()) return;
  if (::unlink(current_.c_str()) != 0) {
    TERN_LOG_WARN("pid_file {}: not removed: {}", current_, std::strerror(errno));
  }
}

bool PidFile::move_aside() {
  if (path_.empty() || current_ != path_) return true;
  const std::string aside = path_ + ".oldbin";
  if (::rename(path_.c_str(), aside.c_str()) != 0) {
    TERN_LOG_ERROR("SIGUSR2: cannot move pid_file {} to {}: {}", path_, aside, std::strerror(errno));
    return false;
  }
  current_ = aside;
  return true;
}

void PidFile::move_back() {
  if (current_ == path_) return;
  if (::rename(current_.c_str(), path_.c_str()) != 0) {
    TERN_LOG_ERROR("pid_file {}: cannot move it back to {}: {}", current_, path_, std::strerror(errno));
    return;
  }
  current_ = path_;
}

}  // namespace tern::server
