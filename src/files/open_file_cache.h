// OpenFileCache: open descriptors and stat results for static files, keyed by
// normalised request path, so a hot file costs no open/fstat per request.
//
// Per event loop: each loop owns one cache (inside its StaticFiles handler),
// so there are no locks and no sharing between threads. Loop thread only.
//
// Entries live in an LRU list bounded twice: by count (each entry holds a
// descriptor) and by bytes (max_bytes: the entries themselves and the
// contents of the files kept in memory). A file's bytes are read into memory
// only once it has proven hot, asked for again while cached: on a site with
// more files than the cache holds, a miss costs an open and an fstat, never
// a read of a file that may not be asked for again. Contents have an LRU
// order of their own. A hot file's bytes come in only if they fit, or in
// place of contents unused for content_idle: when the budget is smaller
// than what clients ask for, the files already in memory stay there rather
// than take turns (a read per request would cost more than the cache
// saves). A new entry makes room by letting go of the least recently used
// contents (their files stay cached, sent by sendfile), whole entries after. A hit younger than
// `valid_for` is returned without any system call; an older one is
// re-checked with one fstatat() on its path: if device, inode, size, mtime
// and ctime are the same the entry is kept (and its clock restarted),
// otherwise the path is opened again. So an edit becomes visible at most `valid_for` after it happened,
// the same trade nginx's open_file_cache_valid makes. Callers pass `now` (the
// loop's cached clock) so that tests can move time by hand.
//
// Files are opened beneath a root directory descriptor (O_PATH|O_DIRECTORY,
// opened once), never by absolute path, with
// O_RDONLY|O_CLOEXEC|O_NONBLOCK|O_NOCTTY. O_NONBLOCK keeps a FIFO from
// blocking the loop in open(); after fstat anything that is neither a regular
// file nor a directory (FIFO, socket, device) is refused (EPERM, answered 403).
// Like nginx we open first and look second, so opening a device node may have
// side effects; a document root should not contain any.
//
// Symlink policy (see SymlinkPolicy). Lookups that fail are not cached, except
// "not found" (ENOENT, ENOTDIR) when Options::cache_not_found is set (the
// default): the static handler probes for a "<file>.gz" sibling on every
// request, and without negative entries each probe of a file that has none
// would cost a failing openat2(). A negative entry is retried after
// `valid_for` like any other; a flood of requests for missing paths can only
// push other entries out of the LRU, never grow it.
//
// Returned OpenFile objects are shared and immutable but for their contents
// (added once, by the cache, on the loop); the cache may drop or replace its
// entry while a response still holds (and sends from) the old one.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/loop_counter.h"
#include "base/result.h"
#include "http/field_block.h"
#include "http/http_date.h"

namespace tern::files {

// One opened file or directory and what fstat said about it when it was
// opened. Owns the descriptor and closes it in the destructor. Immutable, so
// any number of in-flight responses may share it through
// shared_ptr<const OpenFile>; they all belong to the loop that opened it.
class OpenFile {
 public:
  // Takes ownership of `fd`; `st` is its fstat.
  OpenFile(int fd, const struct stat& st);

  ~OpenFile();
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;

  int fd() const { return fd_; }  // open for reading, or O_PATH (OpenFileCacheOptions)
  uint64_t size() const { return size_; }  // in bytes
  time_t mtime() const { return mtime_.tv_sec; }  // seconds since the epoch
  dev_t device() const { return device_; }  // with inode(): which file it is
  ino_t inode() const { return inode_; }    // with device()
  bool is_directory() const { return S_ISDIR(mode_); }  // a directory
  bool is_regular() const { return S_ISREG(mode_); }    // a regular file

  // nginx's strong ETag: "<mtime seconds hex>-<size hex>", quotes included.
  std::string_view etag() const { return {etag_.data(), etag_size_}; }
  // The mtime as an IMF-fixdate, for Last-Modified.
  std::string_view last_modified() const { return {last_modified_.data(), last_modified_.size()}; }

  // The whole file, for small hot files the cache read in (load_content):
  // a response can then carry head and body in one write instead of a
  // write and a sendfile.
  bool has_content() const { return has_content_; }
  std::string_view content() const { return content_; }
  // Reads a regular file into memory; false if it could not be read whole
  // (it is changing). The cache calls it, and drop_content() to make room,
  // on the loop; a response copies what it sends from content() at once.
  bool load_content() const;
  // Frees the content read in: has_content() is false again.
  void drop_content() const;

  // True if `st`, a fresh stat of the same path, still describes this file.
  bool unchanged(const struct stat& st) const;

  // What the static handler worked out for this file the first time it
  // served it under its own name: its content type and its formatted
  // representation fields. A cache, hence mutable; the file cache belongs to
  // one loop, so no lock.
  struct HeadMemo {
    std::string_view content_type;  // into the MimeTypes table; empty: not yet
    http::FieldBlock fields;        // Content-Type, Last-Modified, ETag
    // Whether "<name>.br" and "<name>.gz" were beside the file when last
    // looked for, and when that was (epoch: never). Trusted for as long as
    // a cached entry is.
    struct Sibling {
      std::chrono::steady_clock::time_point checked_at{};  // when looked for
      bool found = false;  // whether it was there then
    };
    Sibling br;  // "<name>.br"
    Sibling gz;  // "<name>.gz"
    // content() compressed on the fly, once each (ResponseWriter::compress_for).
    std::string gzip;
    std::string brotli;
  };
  HeadMemo& head_memo() const { return head_memo_; }  // see HeadMemo

 private:
  int fd_;
  mode_t mode_;
  dev_t device_;
  ino_t inode_;
  uint64_t size_;
  timespec mtime_;
  timespec ctime_;
  uint8_t etag_size_ = 0;
  std::array<char, 2 + 16 + 1 + 16 + 1> etag_{};
  std::array<char, http::kHttpDateSize> last_modified_{};
  mutable bool has_content_ = false;
  mutable std::string content_;
  mutable HeadMemo head_memo_;
};

// Which symbolic links beneath a root a lookup follows.
enum class SymlinkPolicy : uint8_t {
  // The default. Symlinks are followed as long as the whole resolution stays
  // beneath the root: openat2() with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
  // where the kernel checks every step, which a user-space check-then-open
  // could not do without races. An absolute symlink is refused even when it
  // points into the root (RESOLVE_BENEATH rejects all of them); use relative
  // links. Where openat2 is unavailable (kernels before 5.6, or a seccomp
  // filter that predates it; probed once at construction) this degrades to
  // kNever, with a warning, rather than to something unchecked.
  kInsideRoot,
  // Follow symlinks wherever they point (plain openat()). For roots whose
  // owner deliberately links to content elsewhere.
  kAnywhere,
  // Refuse every symlink, even one that stays inside the root (nginx's
  // "disable_symlinks on"): the path is walked one component at a time with
  // O_NOFOLLOW, and a symlink anywhere on it fails with ELOOP.
  kNever,
};

// What an OpenFileCache is made with.
struct OpenFileCacheOptions {
  size_t max_entries = 10000;  // descriptors held; 0 disables caching (every lookup opens)
  // Memory held: the entries (kEntryBytes each, plus the path) and the
  // contents read in. The compressed copies the static handler keeps beside
  // a content (smaller than it) are not counted.
  size_t max_bytes = 32 << 20;
  // How long an entry is trusted: a find() after that looks at the file
  // again (one fstatat) and opens it anew if it changed.
  std::chrono::steady_clock::duration valid_for = std::chrono::seconds(1);
  SymlinkPolicy symlinks = SymlinkPolicy::kInsideRoot;  // which symlinks a lookup follows
  bool cache_not_found = true;  // a path that is not there (ENOENT, ENOTDIR) is cached too
  // Hot regular files up to this size are kept in memory too (0: none).
  size_t memory_max_file_bytes = 16 * 1024;
  // Contents unused for this long may give way to a hotter file's.
  std::chrono::steady_clock::duration content_idle = std::chrono::seconds(10);
  // False: files are only looked at (O_PATH), for their kind and metadata,
  // and need no read permission (scripts that an application server runs).
  bool open_for_reading = true;
};

class OpenFileCache {
 public:
  using Clock = std::chrono::steady_clock;  // the loop's cached clock is one
  using FileResult = Result<std::shared_ptr<const OpenFile>>;  // find()'s answer
  // What an entry costs besides its path and contents: the entry and its
  // index slot, the OpenFile and its memo (roughly).
  static constexpr size_t kEntryBytes = 384;

  // Opens `root`. Start-up only: throws std::system_error if it cannot.
  OpenFileCache(const std::string& root, OpenFileCacheOptions options);

  ~OpenFileCache();
  OpenFileCache(const OpenFileCache&) = delete;
  OpenFileCache& operator=(const OpenFileCache&) = delete;

  // The file or directory at `path`, a normalised absolute request path as
  // produced by http::normalize_path ("/", "/a/b.html", "/dir/"). A trailing
  // slash on something that is not a directory fails with ENOTDIR. On failure
  // the Error carries the errno (see http_status).
  // With remember_missing false, a path that is not there is not cached
  // (a sibling probe, whose answer the caller keeps).
  FileResult find(std::string_view path, Clock::time_point now, bool remember_missing = true);

  // The status to answer for a failed find(): 404 for ENOENT, ENOTDIR and
  // ENAMETOOLONG; 403 for EACCES, EPERM (includes "not a regular file"),
  // ELOOP and EXDEV (a symlink the policy refuses; nginx with
  // disable_symlinks also says 403); 503 for EMFILE and ENFILE (out of
  // descriptors for now); 500 for anything else.
  static int http_status(const Error& error);

  size_t size() const { return index_.size(); }  // the entries held
  size_t bytes() const { return bytes_; }  // counted against max_bytes
  void clear();  // drops every entry (responses in flight keep their files)
  // Drops the entry for `path`, if any: the next find() opens it again
  // (the caller knows the file under that name changed).
  void forget(std::string_view path);
  // Closes the entries not asked for since `before` (least recently used
  // first); returns how many went.
  size_t drop_unused(Clock::time_point before);
  // Where find() counts the lookups it answered from an entry still valid
  // (hits) and those that went to the file system (misses); not owned,
  // null: not counted.
  void set_counters(LoopCounter* hits, LoopCounter* misses) {
    hits_ = hits;
    misses_ = misses;
  }

  // The process is out of descriptors: lets go of the least recently used
  // entries holding one, a quarter of them (at least 16), and returns how
  // many descriptors that closed (those no response still sends from).
  // Connections come first; the cache fills again as descriptors free up.
  // find() does the same when an open fails with EMFILE or ENFILE, then
  // tries once more.
  size_t shed_descriptors();

 private:
  struct Entry {
    std::string path;
    std::shared_ptr<const OpenFile> file;  // null for a cached "not found"
    int error = 0;
    Clock::time_point checked_at;
    Clock::time_point used_at;  // last asked for
    size_t bytes = 0;   // counted in bytes_
    uint32_t hits = 0;  // requests since it was opened, up to 2
    std::list<Entry*>::iterator content_at;  // in contents_, while the file has its content
    bool in_memory() const { return file && file->has_content(); }
  };
  using List = std::list<Entry>;

  void probe_openat2();
  FileResult result_of(const Entry& entry) const;
  bool still_valid(const Entry& entry);
  void refresh(List::iterator entry, FileResult& opened, Clock::time_point now);
  // A cacheable `opened` (see cacheable()) as a new entry.
  void insert(std::string_view path, FileResult& opened, Clock::time_point now);
  // Whether `opened` is worth an entry: a file or directory, or (with
  // remember_missing and cache_not_found) a path that is not there; never
  // with max_entries 0.
  bool cacheable(const FileResult& opened, bool remember_missing = true) const;
  // Counts a request for `entry`; from the second, a small regular file's
  // bytes come into memory when room can be made for them.
  void admit_content(Entry& entry, Clock::time_point now);
  // Lets go of the least recently used contents, until `more` bytes fit;
  // with `idle_before` only of those unused since then. False if they cannot.
  bool free_contents(size_t more, Clock::time_point idle_before);
  void drop_content(Entry& entry);  // frees `entry`'s content, if loaded, and its bytes
  // Drops least recently used entries until `more` bytes and one more entry fit.
  void evict_for_entry(size_t more);
  void drop_last();  // erases the least recently used entry
  // Removes `entry` (its content, its bytes, its index slot); the next one.
  List::iterator erase(List::iterator entry);
  // Opens `path` beneath the root; when out of descriptors, sheds some
  // (shed_descriptors()) and tries once more.
  FileResult open_path(std::string_view path);
  // One open as the symlink policy says, and its fstat: EPERM for what is
  // neither a regular file nor a directory.
  FileResult open_path_once(std::string_view path);
  // `path` without its leading '/' ("." for "/"), NUL-terminated in
  // scratch_: valid until the next call.
  const char* relative(std::string_view path);

  const OpenFileCacheOptions options_;
  int root_fd_ = -1;
  bool have_openat2_ = true;  // see probe_openat2()
  List lru_;                  // most recently used first
  size_t bytes_ = 0;          // of every entry (Entry::bytes)
  std::list<Entry*> contents_;  // entries whose content is loaded, most recently used first
  std::unordered_map<std::string_view, List::iterator> index_;  // keys view Entry::path
  std::string scratch_;       // NUL-terminated relative path, reused
  LoopCounter* hits_ = nullptr;
  LoopCounter* misses_ = nullptr;
};

}  // namespace tern::files
