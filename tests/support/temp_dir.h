// Test support: a temporary directory tree (mkdtemp) that is removed with
// everything in it when the object goes away. Helpers create files,
// directories, symlinks and FIFOs by path relative to the directory.
#pragma once

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <string_view>

namespace tern::testing {

class TempDir {
 public:
  TempDir() {
    std::string templ = "/tmp/tern-test-XXXXXX";
    if (::mkdtemp(templ.data()) != nullptr) path_ = templ;
  }
  ~TempDir() {
    if (path_.empty()) return;
    // Undo chmod 000 first so that removal works for non-root users.
    ::nftw(path_.c_str(), [](const char* p, const struct stat*, int, FTW*) {
      ::chmod(p, 0755);
      return 0;
    }, 16, FTW_PHYS);
    ::nftw(path_.c_str(), [](const char* p, const struct stat*, int, FTW*) {
      return ::remove(p);
    }, 16, FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  std::string at(std::string_view relative) const { return path_ + "/" + std::string(relative); }

  // Creates or truncates a file with the given contents.
  bool write(std::string_view relative, std::string_view contents) const {
    int fd = ::open(at(relative).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    bool ok = ::write(fd, contents.data(), contents.size()) ==
              static_cast<ssize_t>(contents.size());
    return ::close(fd) == 0 && ok;
  }
  bool mkdir(std::string_view relative) const { return ::mkdir(at(relative).c_str(), 0755) == 0; }
  bool symlink(std::string_view target, std::string_view relative) const {
    return ::symlink(std::string(target).c_str(), at(relative).c_str()) == 0;
  }
  bool mkfifo(std::string_view relative) const { return ::mkfifo(at(relative).c_str(), 0644) == 0; }
  bool chmod(std::string_view relative, mode_t mode) const {
    return ::chmod(at(relative).c_str(), mode) == 0;
  }
  // Sets both access and modification time (seconds since the epoch).
  bool set_mtime(std::string_view relative, time_t t) const {
    timespec times[2] = {{t, 0}, {t, 0}};
    return ::utimensat(AT_FDCWD, at(relative).c_str(), times, AT_SYMLINK_NOFOLLOW) == 0;
  }

 private:
  std::string path_;
};

}  // namespace tern::testing
