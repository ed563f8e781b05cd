// The file of one cached response, and how it is written and read back.
//
// A zone keeps each response it stores in a file of its own under its
// directory, named by the hash of the response's key and spread over two
// levels of directories so that none grows huge:
//
//   /var/cache/tern/pages/3f/a0/3fa0c1...e9   (32 hex digits: 16 bytes of BLAKE2b)
//
// The file is a head and then the body, as the upstream sent it:
//
//   fixed part (kFixedSize bytes, little-endian): magic "TERNCACH", format
//     version, the head's size (where the body begins), the body's size,
//     when it was stored and until when it is fresh (Unix seconds), how long
//     it may be served stale while revalidating and after an error, the
//     status, flags, the number of fields;
//   the key, the Vary field names, the variant (the request's values of
//     those fields), each a 32-bit length and the bytes;
//   the fields, each name and value as a 32-bit length and the bytes.
//
// An entry is written to "<name>.tmp.<unique>" in its directory and renamed
// onto its name only once its last byte is written: a crash or kill -9
// during a fill leaves a temp file (removed by the next start), never a
// file that is read as complete. read_entry_head() also checks that the
// file is exactly as long as its head says, so a file cut short by a full
// disk is refused too.
//
// Files are written and read on the thread that asks (a loop's): small
// writes into the page cache, as nginx's workers do.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace tern::cache {

// 16 bytes of BLAKE2b of a key: the entry's name and its index key.
struct KeyHash {
  std::array<uint8_t, 16> bytes{};

  static KeyHash of(std::string_view key);
  // 32 lowercase hex digits.
  std::string hex() const;
  static bool from_hex(std::string_view hex, KeyHash* out);
  bool operator==(const KeyHash&) const = default;
};

struct KeyHashHasher {
  size_t operator()(const KeyHash& h) const {
    size_t out;
    static_assert(sizeof out <= sizeof h.bytes);
    __builtin_memcpy(&out, h.bytes.data(), sizeof out);
    return out;
  }
};

// What the head of an entry's file says.
struct EntryHead {
  static constexpr uint32_t kRevalidate = 1;  // every use asks the origin first (no-cache)
  static constexpr uint32_t kNoStale = 2;     // never served stale (must-revalidate)
  // Not a response: the key's responses vary by the request fields named in
  // `vary`, each stored under the key and its variant.
  static constexpr uint32_t kVaryMarker = 4;
  // The last of `fields` is the origin's X-Accel-Expires: kept so that a
  // revalidation's 304 is judged with it as the response was, never relayed.
  static constexpr uint32_t kAccelExpires = 8;

  std::string key;
  std::vector<std::string> vary;  // field names of the response's Vary
  std::string variant;            // the request's values of those fields
  int status = 200;
  std::vector<std::pair<std::string, std::string>> fields;
  int64_t stored = 0;   // Unix seconds
  int64_t expires = 0;  // fresh until, Unix seconds
  uint32_t stale_while_revalidate = 0;  // seconds after expires
  uint32_t stale_if_error = 0;          // seconds after expires
  uint32_t flags = 0;
  uint64_t body_size = 0;
  uint64_t body_offset = 0;  // where the body begins in the file (read back)

  // The first field with this name (case-insensitive), or "".
  std::string_view field(std::string_view name) const;
  // The fields a response from the entry carries: `fields`, less a kept
  // X-Accel-Expires.
  std::span<const std::pair<std::string, std::string>> relayed_fields() const {
    return {fields.data(), fields.size() - ((flags & kAccelExpires) != 0 && !fields.empty() ? 1 : 0)};
  }
};

// The fixed part's size, and the most a head may take (beyond it an entry
// is not stored, and a file that claims more is refused).
inline constexpr size_t kFixedSize = 64;
inline constexpr size_t kMaxHeadSize = 256 * 1024;

// "<dir>/ab/cd/<hex>" for the hash's hex "abcd...".
std::string entry_path(std::string_view dir, const KeyHash& hash);

// Writes one entry: the head at open(), the body in pieces, its size at
// finish(), the rename at publish() (a Zone does that, under the lock of the
// entry's shard, so that no eviction of the same name runs between). Dropped
// before publish(), it removes its temp file. Not copyable; one thread at a
// time.
class EntryWriter {
 public:
  EntryWriter() = default;
  ~EntryWriter();
  EntryWriter(const EntryWriter&) = delete;
  EntryWriter& operator=(const EntryWriter&) = delete;

  // Makes the directories and the temp file and writes the head (its body
  // size is set at commit). An error: the head is too large, or the file
  // cannot be made or written (a full disk).
  Result<void> open(std::string_view dir, const KeyHash& hash, const EntryHead& head);
  Result<void> append(std::string_view piece);
  // Appends `length` bytes of the open file `fd` from `offset` (the body
  // of an older entry, whose head a revalidation changed).
  Result<void> append_file(int fd, uint64_t offset, uint64_t length);
  // Sets the body's size in the head and closes the file. Returns the
  // file's size.
  Result<uint64_t> finish();
  // Renames the finished file onto its name (replacing an older entry).
  Result<void> publish();
  // finish() and publish().
  Result<uint64_t> commit();
  const std::string& path() const { return path_; }
  // Removes the temp file (as the destructor does).
  void abandon();

  bool is_open() const { return fd_ >= 0; }
  uint64_t body_size() const { return body_size_; }
  uint64_t inode() const { return inode_; }  // after finish()
  uint64_t head_size() const { return head_size_; }  // where the body begins

 private:
  int fd_ = -1;
  bool finished_ = false;  // closed, the temp file still there
  std::string temp_;
  std::string path_;
  uint64_t head_size_ = 0;
  uint64_t body_size_ = 0;
  uint64_t inode_ = 0;
};

// Reads and checks the head of the entry file open as `fd`: its magic,
// version, sizes, and that the file is exactly head and body long. Sets
// *inode to the file's (to tell it from a later entry under its name).
Result<EntryHead> read_entry_head(int fd, uint64_t* inode = nullptr);

// Whether a name in a zone's directory is an entry's temp file.
bool is_temp_name(std::string_view name);
// What the names of this process's temp files hold: ".tmp.<pid>-<random>.".
// Random for each start, so that a process whose pid repeats that of one
// killed while filling (PID 1 in a container) takes its files for strays.
const std::string& own_temp_tag();

}  // namespace tern::cache
