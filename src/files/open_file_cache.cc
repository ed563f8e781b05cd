#include "files/open_file_cache.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <iterator>
#include <system_error>

#include "base/assert.h"
#include "base/log.h"

namespace tern::files {
namespace {

constexpr int kOpenFlags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
// Only to look at a file (a script another process runs): no read
// permission needed, and nothing a device node could react to.
constexpr int kLookFlags = O_PATH | O_CLOEXEC;

// Retries an open on EINTR and, a few times, on EAGAIN (openat2 returns it
// when a concurrent rename might have let ".." escape; our paths hold no "..",
// but the kernel may still ask). Returns the fd or -1 with errno set.
template <typename Open>
int retry_open(Open open) {
  for (int attempt = 0;; ++attempt) {
    int fd = open();
    if (fd >= 0) return fd;
    if (errno == EINTR || (errno == EAGAIN && attempt < 3)) continue;
    return -1;
  }
}

int open_beneath(int root_fd, const char* relative, int flags) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, root_fd, relative, &how, sizeof how));
}

// Opens one intermediate component as an O_PATH directory fd without
// following it. Fails with ELOOP for a symlink and ENOTDIR for anything else
// that is not a directory.
int open_directory_component(int dir_fd, const char* name) {
  int fd = retry_open([&] { return ::openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC); });
  if (fd < 0) return -1;
  struct stat st {};
  int err = 0;
  if (::fstat(fd, &st) != 0) {
    err = errno;
  } else if (!S_ISDIR(st.st_mode)) {
    err = S_ISLNK(st.st_mode) ? ELOOP : ENOTDIR;
  }
  if (err == 0) return fd;
  ::close(fd);
  errno = err;
  return -1;
}

// SymlinkPolicy::kNever: walks `relative` ("a/b/c", "a/b/", ".") one
// component at a time, never following a symlink. Normalised paths hold no
// "." or ".." components, so the walk cannot leave the root either. Edits
// `relative` in place (slashes become NULs).
int open_without_symlinks(int root_fd, std::string& relative, int open_flags) {
  bool trailing_slash = relative.size() > 1 && relative.back() == '/';
  if (trailing_slash) relative.pop_back();
  int dir_fd = root_fd;
  size_t start = 0;
  for (size_t slash; (slash = relative.find('/', start)) != std::string::npos; start = slash + 1) {
    relative[slash] = '\0';
    int next = open_directory_component(dir_fd, relative.c_str() + start);
    int err = errno;
    if (dir_fd != root_fd) ::close(dir_fd);
    errno = err;
    if (next < 0) return -1;
    dir_fd = next;
  }
  // A trailing slash would make the kernel follow a final symlink despite
  // O_NOFOLLOW, so it was stripped and is expressed as O_DIRECTORY instead.
  // That combination reports a symlink as ENOTDIR; look again to say ELOOP.
  const char* name = relative.c_str() + start;
  int flags = open_flags | O_NOFOLLOW | (trailing_slash ? O_DIRECTORY : 0);
  int fd = retry_open([&] { return ::openat(dir_fd, name, flags); });
  int err = errno;
  struct stat st {};
  if (fd < 0 && err == ENOTDIR && trailing_slash &&
      ::fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
    err = ELOOP;
  }
  if (dir_fd != root_fd) ::close(dir_fd);
  errno = err;
  return fd;
}

bool same_time(const timespec& a, const timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

}  // namespace

OpenFile::OpenFile(int fd, const struct stat& st)
    : fd_(fd),
      mode_(st.st_mode),
      device_(st.st_dev),
      inode_(st.st_ino),
      size_(static_cast<uint64_t>(st.st_size)),
      mtime_(st.st_mtim),
      ctime_(st.st_ctim) {
  char* p = etag_.data();
  char* end = p + etag_.size();
  *p++ = '"';
  p = std::to_chars(p, end, static_cast<uint64_t>(mtime_.tv_sec), 16).ptr;
  *p++ = '-';
  p = std::to_chars(p, end, size_, 16).ptr;
  *p++ = '"';
  etag_size_ = static_cast<uint8_t>(p - etag_.data());
  http::format_http_date(mtime_.tv_sec, last_modified_);
}

bool OpenFile::load_content() const {
  if (has_content_ || !S_ISREG(mode_)) return has_content_;
  content_.resize(size_);
  ssize_t n = ::pread(fd_, content_.data(), size_, 0);
  // A short read means the file is changing under us: serve it from the
  // fd instead, where a truncation is at least noticed (TcpConnection).
  has_content_ = n == static_cast<ssize_t>(size_);
  if (!has_content_) std::string().swap(content_);
  return has_content_;
}

void OpenFile::drop_content() const {
  has_content_ = false;
  std::string().swap(content_);
}

OpenFile::~OpenFile() { ::close(fd_); }

bool OpenFile::unchanged(const struct stat& st) const {
  return st.st_dev == device_ && st.st_ino == inode_ && st.st_mode == mode_ &&
         static_cast<uint64_t>(st.st_size) == size_ && same_time(st.st_mtim, mtime_) &&
         same_time(st.st_ctim, ctime_);
}

OpenFileCache::OpenFileCache(const std::string& root, OpenFileCacheOptions options)
    : options_(options) {
  root_fd_ = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root_fd_ < 0) {
    throw std::system_error(errno, std::generic_category(), "cannot open document root " + root);
  }
  if (options_.symlinks == SymlinkPolicy::kInsideRoot) probe_openat2();
}

// Kernels before 5.6 answer ENOSYS, and container seccomp profiles older than
// the syscall answer EPERM for it; finding out per request would turn every
// file into a 403. Opening the root itself cannot fail with either otherwise.
void OpenFileCache::probe_openat2() {
  int fd = retry_open([&] { return open_beneath(root_fd_, ".", kLookFlags); });
  if (fd >= 0) {
    ::close(fd);
    return;
  }
  if (errno == ENOSYS || errno == EPERM) {
    TERN_LOG_WARN("openat2 is unavailable ({}); refusing all symlinks under the document root",
                  std::strerror(errno));
    have_openat2_ = false;
  }
}

OpenFileCache::~OpenFileCache() {
  clear();
  ::close(root_fd_);
}

void OpenFileCache::clear() {
  index_.clear();
  contents_.clear();
  lru_.clear();
  bytes_ = 0;
}

OpenFileCache::FileResult OpenFileCache::find(std::string_view path, Clock::time_point now,
                                              bool remember_missing) {
  auto it = index_.find(path);
  if (it == index_.end()) {
    if (misses_ != nullptr) misses_->add();
    FileResult opened = open_path(path);
    if (cacheable(opened, remember_missing)) insert(path, opened, now);
    return opened;
  }
  List::iterator entry = it->second;
  lru_.splice(lru_.begin(), lru_, entry);
  entry->used_at = now;
  if (now - entry->checked_at >= options_.valid_for) {
    if (!still_valid(*entry)) {
      if (misses_ != nullptr) misses_->add();
      FileResult opened = open_path(path);
      refresh(entry, opened, now);
      return opened;
    }
    entry->checked_at = now;
  }
  if (hits_ != nullptr) hits_->add();
  if (entry->in_memory()) {
    contents_.splice(contents_.begin(), contents_, entry->content_at);
  } else {
    admit_content(*entry, now);
  }
  return result_of(*entry);
}

// A file proves hot when it is asked for again while cached: its bytes come
// into memory then, if it is small enough and room can be made for them.
void OpenFileCache::admit_content(Entry& entry, Clock::time_point now) {
  if (entry.hits < 2) ++entry.hits;
  if (entry.hits < 2 || !entry.file) return;
  const OpenFile& file = *entry.file;
  if (!options_.open_for_reading || !file.is_regular() || file.size() > options_.memory_max_file_bytes ||
      !free_contents(file.size(), now - options_.content_idle) || !file.load_content()) {
    return;
  }
  contents_.push_front(&entry);
  entry.content_at = contents_.begin();
  entry.bytes += file.size();
  bytes_ += file.size();
}

bool OpenFileCache::free_contents(size_t more, Clock::time_point idle_before) {
  while (bytes_ + more > options_.max_bytes && !contents_.empty() &&
         contents_.back()->used_at < idle_before) {
    drop_content(*contents_.back());
  }
  return bytes_ + more <= options_.max_bytes;
}

void OpenFileCache::drop_content(Entry& entry) {
  if (!entry.in_memory()) return;
  contents_.erase(entry.content_at);
  const size_t size = entry.file->size();
  entry.file->drop_content();
  entry.bytes -= size;
  bytes_ -= size;
}

void OpenFileCache::evict_for_entry(size_t more) {
  free_contents(more, Clock::time_point::max());
  while (!lru_.empty() && (bytes_ + more > options_.max_bytes || lru_.size() >= options_.max_entries)) {
    drop_last();
  }
}

void OpenFileCache::forget(std::string_view path) {
  if (const auto it = index_.find(path); it != index_.end()) erase(it->second);
}

size_t OpenFileCache::drop_unused(Clock::time_point before) {
  size_t dropped = 0;
  for (; !lru_.empty() && lru_.back().used_at < before; ++dropped) drop_last();
  return dropped;
}

void OpenFileCache::drop_last() { erase(std::prev(lru_.end())); }

OpenFileCache::List::iterator OpenFileCache::erase(List::iterator entry) {
  drop_content(*entry);
  bytes_ -= entry->bytes;
  index_.erase(std::string_view(entry->path));
  return lru_.erase(entry);
}

int OpenFileCache::http_status(const Error& error) {
  switch (error.code) {
    case ENOENT:
    case ENOTDIR:
    case ENAMETOOLONG:
      return 404;
    case EACCES:
    case EPERM:
    case ELOOP:
    case EXDEV:
      return 403;
    case EMFILE:
    case ENFILE:
      // Out of descriptors for now (this loop's cache had none to give):
      // another loop's cache gives way at the next accept that finds none.
      return 503;
    default:
      return 500;
  }
}

OpenFileCache::FileResult OpenFileCache::result_of(const Entry& entry) const {
  if (entry.file) return entry.file;
  return Error{entry.error, "open"};
}

// One fstatat() instead of an open: the common case after `valid_for` is
// that nothing changed. Under kNever the last component is not followed, so
// a file swapped for a symlink shows up as a change. A negative entry is never
// still valid; the caller retries the open.
bool OpenFileCache::still_valid(const Entry& entry) {
  if (!entry.file) return false;
  int flags = options_.symlinks == SymlinkPolicy::kNever ? AT_SYMLINK_NOFOLLOW : 0;
  struct stat st {};
  if (::fstatat(root_fd_, relative(entry.path), &st, flags) != 0) return false;
  return entry.file->unchanged(st);
}

bool OpenFileCache::cacheable(const FileResult& opened, bool remember_missing) const {
  if (options_.max_entries == 0) return false;
  if (opened.ok()) return true;
  int code = opened.error().code;
  return remember_missing && options_.cache_not_found && (code == ENOENT || code == ENOTDIR);
}

// Updates a stale entry in place with a fresh open, or drops it if the
// outcome is not worth caching.
void OpenFileCache::refresh(List::iterator entry, FileResult& opened, Clock::time_point now) {
  // The old file goes with its content (a response may still hold it);
  // only the accounting changes.
  if (entry->in_memory()) contents_.erase(entry->content_at);
  bytes_ -= entry->bytes;
  if (!cacheable(opened)) {
    index_.erase(std::string_view(entry->path));
    lru_.erase(entry);
    return;
  }
  entry->file = opened.ok() ? opened.value() : nullptr;
  entry->error = opened.ok() ? 0 : opened.error().code;
  entry->checked_at = now;
  entry->hits = 1;  // the new file proves hot on its own
  entry->bytes = kEntryBytes + entry->path.size();
  bytes_ += entry->bytes;
}

void OpenFileCache::insert(std::string_view path, FileResult& opened, Clock::time_point now) {
  const size_t bytes = kEntryBytes + path.size();
  if (bytes > options_.max_bytes) return;
  evict_for_entry(bytes);
  Entry entry{std::string(path), opened.ok() ? opened.value() : nullptr,
              opened.ok() ? 0 : opened.error().code, now, now, bytes, /*hits=*/1, {}};
  lru_.push_front(std::move(entry));
  index_.emplace(std::string_view(lru_.front().path), lru_.begin());
  bytes_ += bytes;
}

size_t OpenFileCache::shed_descriptors() {
  size_t holding = 0;
  for (const Entry& entry : lru_) holding += entry.file ? 1 : 0;
  const size_t target = std::max<size_t>(16, holding / 4);
  size_t closed = 0, dropped = 0;
  for (auto it = lru_.end(); it != lru_.begin() && dropped < target;) {
    --it;
    if (!it->file) continue;  // a cached "not found" holds no descriptor
    closed += it->file.use_count() == 1 ? 1 : 0;  // else a response still holds it
    ++dropped;
    it = erase(it);
  }
  return closed;
}

OpenFileCache::FileResult OpenFileCache::open_path(std::string_view path) {
  FileResult opened = open_path_once(path);
  if (!opened.ok() && (opened.error().code == EMFILE || opened.error().code == ENFILE) &&
      shed_descriptors() > 0) {
    opened = open_path_once(path);
  }
  return opened;
}

OpenFileCache::FileResult OpenFileCache::open_path_once(std::string_view path) {
  const char* rel = relative(path);
  const int flags = options_.open_for_reading ? kOpenFlags : kLookFlags;
  int fd = -1;
  switch (options_.symlinks) {
    case SymlinkPolicy::kAnywhere:
      fd = retry_open([&] { return ::openat(root_fd_, rel, flags); });
      break;
    case SymlinkPolicy::kInsideRoot:
      if (have_openat2_) {
        fd = retry_open([&] { return open_beneath(root_fd_, rel, flags); });
        break;
      }
      [[fallthrough]];
    case SymlinkPolicy::kNever:
      fd = open_without_symlinks(root_fd_, scratch_, flags);
      break;
  }
  if (fd < 0) return Error{errno, "open"};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Error{err, "fstat"};
  }
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Error{EPERM, "not a regular file or directory"};
  }
  return std::shared_ptr<const OpenFile>(std::make_shared<const OpenFile>(fd, st));
}

// "/a/b" -> "a/b", "/" -> ".", NUL-terminated in scratch_ (valid until the
// next call).
const char* OpenFileCache::relative(std::string_view path) {
  TERN_DCHECK(!path.empty() && path.front() == '/');
  scratch_.assign(path.substr(1));
  if (scratch_.empty()) scratch_ = ".";
  return scratch_.c_str();
}

}  // namespace tern::files
