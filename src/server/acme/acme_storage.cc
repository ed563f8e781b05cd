#include "server/acme/acme_storage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace tern::server {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw std::runtime_error("acme storage: " + what + " " + path + ": " + std::strerror(errno));
}

bool is_base64url(std::string_view text) {
  if (text.empty() || text.size() > 256) return false;
  for (char c : text) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

AcmeStorage::AcmeStorage(std::string root) : root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
}

std::string AcmeStorage::account_key_path() const { return root_ + "/account.key"; }

std::string AcmeStorage::certificate_path(std::string_view name) const {
  return root_ + "/certificates/" + std::string(name) + "/certificate.pem";
}

std::string AcmeStorage::key_path(std::string_view name) const {
  return root_ + "/certificates/" + std::string(name) + "/key.pem";
}

std::string AcmeStorage::challenge_path(std::string_view token) const {
  if (!is_base64url(token)) return {};
  return root_ + "/challenges/" + std::string(token);
}

void AcmeStorage::prepare(const std::optional<Identity>& owner) const {
  make_private_dirs(root_ + "/certificates", owner, "acme storage");
  make_private_dirs(root_ + "/challenges", owner, "acme storage");
  if (::chmod(root_.c_str(), 0700) != 0) fail("chmod", root_);
}

void AcmeStorage::write_file(const std::string& path, std::string_view data, mode_t mode) {
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) make_private_dirs(path.substr(0, slash), std::nullopt, "acme storage");
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) fail("open", temp);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int saved = errno;
      ::close(fd);
      ::unlink(temp.c_str());
      errno = saved;
      fail("write", temp);
    }
    done += static_cast<size_t>(n);
  }
  // The mode asked for, whatever the umask took away or the file had.
  if (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0) {
    const int saved = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    errno = saved;
    fail("sync", temp);
  }
  ::close(fd);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temp.c_str());
    errno = saved;
    fail("rename", path);
  }
}

std::optional<std::string> AcmeStorage::read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buffer[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buffer, static_cast<size_t>(n));
    if (out.size() > (1u << 20)) break;  // no certificate chain is this long
  }
  ::close(fd);
  return out;
}

AcmeStorage::Lock::~Lock() {
  if (fd_ >= 0) ::close(fd_);  // lets go of the lock
}

AcmeStorage::Lock& AcmeStorage::Lock::operator=(Lock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

std::optional<AcmeStorage::Lock> AcmeStorage::try_lock() const {
  const std::string path = root_ + "/lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) fail("open", path);
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  // An open file description's lock (not the process's): closing another
  // descriptor of the file does not let go of it.
  if (::fcntl(fd, F_OFD_SETLK, &lock) != 0) {
    const int saved = errno;
    ::close(fd);
    if (saved == EACCES || saved == EAGAIN) return std::nullopt;
    errno = saved;
    fail("lock", path);
  }
  return Lock(fd);
}

}  // namespace tern::server
