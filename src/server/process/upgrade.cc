#include "server/process/upgrade.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace tern::server {
namespace {

constexpr int kFirstFd = 3;  // SD_LISTEN_FDS_START

int socket_option(int fd, int option) {
  int value = 0;
  socklen_t len = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, option, &value, &len) != 0) return -1;
  return value;
}

// Writes `value` in decimal at `out` (async-signal-safe: used between fork
// and exec).
void put_decimal(char* out, long value) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0);
  while (n > 0) *out++ = digits[--n];
  *out = '\0';
}

}  // namespace

std::string executable_path() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  return std::string(buf, static_cast<size_t>(n));
}

std::vector<int> listening_descriptors() {
  std::vector<int> fds;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return fds;
  const int own = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == own) continue;
    const int domain = socket_option(static_cast<int>(fd), SO_DOMAIN);
    if ((domain == AF_INET || domain == AF_INET6) && socket_option(static_cast<int>(fd), SO_TYPE) == SOCK_STREAM &&
        socket_option(static_cast<int>(fd), SO_ACCEPTCONN) == 1) {
      fds.push_back(static_cast<int>(fd));
    }
  }
  ::closedir(dir);
  return fds;
}

Result<pid_t> start_upgrade(const std::string& executable, const std::vector<std::string>& argv,
                            const std::vector<int>& sockets) {
  // Everything the child needs is made before fork: after it, in a process
  // with threads, only async-signal-safe calls are allowed.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    if (entry.starts_with("LISTEN_") || entry.starts_with("TERN_UPGRADE_FROM=")) continue;
    env_strings.emplace_back(entry);
  }
  env_strings.push_back("LISTEN_FDS=" + std::to_string(sockets.size()));
  env_strings.push_back("TERN_UPGRADE_FROM=" + std::to_string(::getpid()));
  std::string listen_pid = "LISTEN_PID=" + std::string(24, '\0');
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(listen_pid.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argvp;
  for (std::string& a : args) argvp.push_back(a.data());
  argvp.push_back(nullptr);
  const int count = static_cast<int>(sockets.size());
  // Out of the way of 3..3+count first, so that no dup2 overwrites a
  // socket not moved yet.
  const int high_base = kFirstFd + count + 16;

  pid_t pid = ::fork();
  if (pid < 0) return Error{errno, "fork"};
  if (pid > 0) return pid;

  // The child.
  put_decimal(listen_pid.data() + std::strlen("LISTEN_PID="), static_cast<long>(::getpid()));
  std::vector<int>::size_type i = 0;
  int high[1024];
  if (count > 1024) ::_exit(126);
  for (i = 0; i < sockets.size(); ++i) {
    high[i] = ::fcntl(sockets[i], F_DUPFD_CLOEXEC, high_base);
    if (high[i] < 0) ::_exit(126);
  }
  for (i = 0; i < sockets.size(); ++i) {
    // dup2 leaves the new descriptor without close-on-exec.
    if (::dup2(high[i], kFirstFd + static_cast<int>(i)) < 0) ::_exit(126);
  }
  ::execve(executable.c_str(), argvp.data(), envp.data());
  ::_exit(127);
}

}  // namespace tern::server
