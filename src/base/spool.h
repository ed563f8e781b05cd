// Spool: bytes kept in memory up to a limit and, past it, in an unlinked
// temporary file: a request body waiting for its handler or its upstream, a
// response waiting for a slow client. What a thousand slow uploads hold then
// sits in the page cache, where the kernel can write it out, instead of in
// the server's heap (nginx's client_body_buffer_size and temp files).
//
//   Spool body;
//   body.configure(16 * 1024, "/tmp");
//   if (!body.append(piece)) ...            // 500: the disk is full
//   auto all = body.view();                 // memory, or the file mapped
//   auto part = body.read(offset, 65536, &scratch);  // a piece at a time
//   body.clear();                           // empty again, file closed
//
// The bytes are either all in memory or all in the file: the first append
// that would pass the limit moves what memory holds into a new file (opened
// with O_TMPFILE, so it has no name and vanishes with its descriptor), and
// everything after goes there too, until clear(). Writes and reads are plain
// blocking calls on the caller's thread, as nginx makes them: a temporary
// file lives on a local disk or tmpfs.
//
// Memory capacity (at most the limit) is kept across clear(), so a pooled
// Spool stops allocating. Not thread-safe; movable, not copyable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace tern {

class Spool {
 public:
  Spool() = default;
  ~Spool();
  // Takes the other's bytes (and file); the other is left empty.
  Spool(Spool&& other) noexcept;
  Spool& operator=(Spool&& other) noexcept;

  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  // Memory limit and the directory for the file; takes effect for bytes
  // appended from now on (call it on an empty spool).
  void configure(size_t memory_limit, std::string_view temp_dir);

  // Adds bytes at the end: in memory while all of them fit the limit; past
  // it, everything held moves to a file, where later bytes go too. Fails
  // when the file cannot be made or written.
  Result<void> append(std::string_view data);
  uint64_t size() const { return size_; }       // bytes held
  bool empty() const { return size_ == 0; }     // no byte held
  bool in_file() const { return fd_ >= 0; }     // whether they went to a file

  // Up to `max` bytes from `offset` (clamped to the end): a view of the
  // memory, or bytes read from the file into *scratch. Valid until the next
  // call that changes the spool or scratch.
  Result<std::string_view> read(uint64_t offset, size_t max, std::string* scratch) const;
  // Everything as one view: the memory, or the file mapped read-only
  // (unmapped by clear() or an append).
  Result<std::string_view> view();

  // Empty again: the file (if any) is closed and so deleted. Inline: most
  // requests have no body, and their spool is cleared for nothing.
  void clear() {
    if (size_ != 0 || fd_ >= 0) clear_slow();
  }

 private:
  void clear_slow();
  Result<void> spill();
  Result<void> write_file(std::string_view data);
  void unmap();

  size_t memory_limit_ = 16 * 1024;
  std::string temp_dir_ = "/tmp";
  std::string memory_;
  int fd_ = -1;
  uint64_t size_ = 0;
  void* map_ = nullptr;
  size_t map_size_ = 0;
};

// Opens an unnamed temporary file in `dir` for reading and writing (O_TMPFILE,
// or a named file unlinked at once where the file system lacks it).
Result<int> open_temp_file(const std::string& dir);

}  // namespace tern
