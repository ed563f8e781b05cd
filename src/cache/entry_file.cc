#include "cache/entry_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>

#include "http/request.h"

namespace tern::cache {
namespace {

constexpr char kMagic[8] = {'T', 'E', 'R', 'N', 'C', 'A', 'C', 'H'};
constexpr uint32_t kVersion = 1;
// Offsets into the fixed part.
constexpr size_t kHeadSizeAt = 12;
constexpr size_t kBodySizeAt = 16;

void put32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_text(std::string& out, std::string_view text) {
  put32(out, static_cast<uint32_t>(text.size()));
  out.append(text);
}

uint64_t get(std::string_view in, size_t at, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(in[at + i])} << (8 * i);
  return v;
}

// Reads texts from the variable part of a head, bounds checked.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool text(std::string* out) {
    if (in_.size() - at_ < 4) return false;
    const uint64_t size = get(in_, at_, 4);
    at_ += 4;
    if (in_.size() - at_ < size) return false;
    out->assign(in_.substr(at_, size));
    at_ += size;
    return true;
  }
  bool done() const { return at_ == in_.size(); }

 private:
  std::string_view in_;
  size_t at_ = 0;
};

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool read_all(int fd, char* out, size_t size, off_t at) {
  while (size > 0) {
    const ssize_t n = ::pread(fd, out, size, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    out += n;
    size -= static_cast<size_t>(n);
    at += n;
  }
  return true;
}

// mkdir that tolerates what exists.
bool make_dir(const std::string& path) { return ::mkdir(path.c_str(), 0700) == 0 || errno == EEXIST; }

std::string encode_head(const EntryHead& head) {
  std::string out;
  out.reserve(kFixedSize + head.key.size() + 256);
  out.append(kMagic, sizeof kMagic);
  put32(out, kVersion);
  put32(out, 0);  // the head's size, set below
  put64(out, 0);  // the body's size, set at commit
  put64(out, static_cast<uint64_t>(head.stored));
  put64(out, static_cast<uint64_t>(head.expires));
  put32(out, head.stale_while_revalidate);
  put32(out, head.stale_if_error);
  put32(out, static_cast<uint32_t>(head.status));
  put32(out, head.flags);
  put32(out, static_cast<uint32_t>(head.vary.size()));
  put32(out, static_cast<uint32_t>(head.fields.size()));
  out.resize(kFixedSize, '\0');
  put_text(out, head.key);
  for (const std::string& name : head.vary) put_text(out, name);
  put_text(out, head.variant);
  for (const auto& [name, value] : head.fields) {
    put_text(out, name);
    put_text(out, value);
  }
  const auto size = static_cast<uint32_t>(out.size());
  for (int i = 0; i < 4; ++i) out[kHeadSizeAt + i] = static_cast<char>((size >> (8 * i)) & 0xff);
  return out;
}

}  // namespace

KeyHash KeyHash::of(std::string_view key) {
  // BLAKE2b costs about 2,000 instructions for a short key, a fifth of all
  // a loop spends on a cache hit, and a hit's key comes again and again:
  // each thread keeps the hashes of the keys it hashed last, one per slot
  // (a key found by a cheap hash of its own, compared whole). Bounded: at
  // most kSlots keys of up to kLongest bytes a thread.
  struct Remembered {
    std::string key;
    KeyHash hash;
    bool set = false;
  };
  constexpr size_t kSlots = 256;
  constexpr size_t kLongest = 512;
  thread_local std::array<Remembered, kSlots> remembered;
  Remembered* slot = nullptr;
  if (key.size() <= kLongest) {
    slot = &remembered[std::hash<std::string_view>{}(key) % kSlots];
    if (slot->set && slot->key == key) return slot->hash;
  }
  KeyHash h;
  crypto_generichash(h.bytes.data(), h.bytes.size(), reinterpret_cast<const unsigned char*>(key.data()), key.size(),
                     nullptr, 0);
  if (slot != nullptr) {
    slot->key.assign(key);
    slot->hash = h;
    slot->set = true;
  }
  return h;
}

std::string KeyHash::hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xf];
  }
  return out;
}

bool KeyHash::from_hex(std::string_view hex, KeyHash* out) {
  if (hex.size() != 32) return false;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < 16; ++i) {
    const int hi = digit(hex[2 * i]);
    const int lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

std::string_view EntryHead::field(std::string_view name) const {
  for (const auto& [n, v] : fields) {
    if (http::iequals(n, name)) return v;
  }
  return {};
}

std::string entry_path(std::string_view dir, const KeyHash& hash) {
  const std::string hex = hash.hex();
  std::string out(dir);
  out.append("/").append(hex, 0, 2).append("/").append(hex, 2, 2).append("/").append(hex);
  return out;
}

bool is_temp_name(std::string_view name) { return name.find(".tmp.") != std::string_view::npos; }

const std::string& own_temp_tag() {
  static const std::string tag = [] {
    // The server initialises libsodium before its threads start; a program
    // of its own may not have. Where the kernel gives no random bytes at
    // all, libsodium aborts the process (in randombytes_buf()), as it would
    // for the server's keys: the result needs no check here.
    [[maybe_unused]] const int initialised = sodium_init();
    unsigned char random[8];
    randombytes_buf(random, sizeof random);
    char hex[2 * sizeof random + 1];
    sodium_bin2hex(hex, sizeof hex, random, sizeof random);
    return ".tmp." + std::to_string(::getpid()) + "-" + hex + ".";
  }();
  return tag;
}

EntryWriter::~EntryWriter() { abandon(); }

void EntryWriter::abandon() {
  if (fd_ >= 0) ::close(fd_);
  if (fd_ >= 0 || finished_) ::unlink(temp_.c_str());
  fd_ = -1;
  finished_ = false;
}

Result<void> EntryWriter::open(std::string_view dir, const KeyHash& hash, const EntryHead& head) {
  abandon();
  const std::string encoded = encode_head(head);
  if (encoded.size() > kMaxHeadSize) return Error{E2BIG, "cache entry head"};
  path_ = entry_path(dir, hash);
  // The two levels of directories: "<dir>/ab" and "<dir>/ab/cd".
  if (!make_dir(path_.substr(0, dir.size() + 3)) || !make_dir(path_.substr(0, dir.size() + 6))) {
    return errno_error("cache directory", errno);
  }
  static std::atomic<uint64_t> serial{0};
  temp_ = path_ + own_temp_tag() + std::to_string(serial.fetch_add(1));
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd_ < 0) return errno_error("cache entry", errno);
  head_size_ = encoded.size();
  body_size_ = 0;
  if (!write_all(fd_, encoded)) {
    const int code = errno == 0 ? ENOSPC : errno;
    abandon();
    return errno_error("cache entry write", code);
  }
  return {};
}

Result<void> EntryWriter::append(std::string_view piece) {
  if (fd_ < 0) return Error{EBADF, "cache entry write"};
  if (!write_all(fd_, piece)) {
    const int code = errno == 0 ? ENOSPC : errno;
    abandon();
    return errno_error("cache entry write", code);
  }
  body_size_ += piece.size();
  return {};
}

Result<void> EntryWriter::append_file(int fd, uint64_t offset, uint64_t length) {
  if (fd_ < 0) return Error{EBADF, "cache entry write"};
  auto from = static_cast<off64_t>(offset);
  uint64_t left = length;
  while (left > 0) {
    // In the kernel where it can (the same filesystem); else through memory.
    ssize_t n = ::copy_file_range(fd, &from, fd_, nullptr, left, 0);
    if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL)) {
      char buffer[64 * 1024];
      n = ::pread(fd, buffer, std::min<uint64_t>(left, sizeof buffer), from);
      if (n > 0 && !write_all(fd_, std::string_view(buffer, static_cast<size_t>(n)))) {
        n = -1;
        if (errno == 0) errno = ENOSPC;
      }
      if (n > 0) from += n;
    }
    if (n <= 0) {
      const int code = n == 0 ? EIO : errno;  // 0: the file is shorter than it said
      abandon();
      return errno_error("cache entry copy", code);
    }
    left -= static_cast<uint64_t>(n);
    body_size_ += static_cast<uint64_t>(n);
  }
  return {};
}

Result<uint64_t> EntryWriter::finish() {
  if (fd_ < 0) return Error{EBADF, "cache entry finish"};
  std::string size;
  put64(size, body_size_);
  if (::pwrite(fd_, size.data(), size.size(), kBodySizeAt) != static_cast<ssize_t>(size.size())) {
    const int code = errno;
    abandon();
    return errno_error("cache entry write", code);
  }
  struct stat st;
  inode_ = ::fstat(fd_, &st) == 0 ? st.st_ino : 0;
  const int closed = ::close(fd_);
  const int code = errno;
  fd_ = -1;
  finished_ = true;
  if (closed != 0) {
    abandon();
    return errno_error("cache entry close", code);
  }
  return head_size_ + body_size_;
}

Result<void> EntryWriter::publish() {
  if (!finished_) return Error{EBADF, "cache entry publish"};
  finished_ = false;
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    const int code = errno;
    ::unlink(temp_.c_str());
    return errno_error("cache entry rename", code);
  }
  return {};
}

Result<uint64_t> EntryWriter::commit() {
  Result<uint64_t> size = finish();
  if (!size) return size;
  if (Result<void> published = publish(); !published) return published.error();
  return size;
}

Result<EntryHead> read_entry_head(int fd, uint64_t* inode) {
  char fixed[kFixedSize];
  struct stat st;
  if (::fstat(fd, &st) != 0) return errno_error("cache entry stat", errno);
  if (inode != nullptr) *inode = st.st_ino;
  if (!read_all(fd, fixed, sizeof fixed, 0)) return Error{EINVAL, "cache entry: short head"};
  const std::string_view in(fixed, sizeof fixed);
  if (std::memcmp(fixed, kMagic, sizeof kMagic) != 0 || get(in, 8, 4) != kVersion) {
    return Error{EINVAL, "cache entry: not an entry of this version"};
  }
  EntryHead head;
  head.body_offset = get(in, kHeadSizeAt, 4);
  head.body_size = get(in, kBodySizeAt, 8);
  if (head.body_offset < kFixedSize || head.body_offset > kMaxHeadSize ||
      static_cast<uint64_t>(st.st_size) != head.body_offset + head.body_size) {
    return Error{EINVAL, "cache entry: sizes do not match the file"};
  }
  head.stored = static_cast<int64_t>(get(in, 24, 8));
  head.expires = static_cast<int64_t>(get(in, 32, 8));
  head.stale_while_revalidate = static_cast<uint32_t>(get(in, 40, 4));
  head.stale_if_error = static_cast<uint32_t>(get(in, 44, 4));
  head.status = static_cast<int>(get(in, 48, 4));
  head.flags = static_cast<uint32_t>(get(in, 52, 4));
  const uint64_t vary = get(in, 56, 4);
  const uint64_t fields = get(in, 60, 4);
  std::string rest(head.body_offset - kFixedSize, '\0');
  if (!read_all(fd, rest.data(), rest.size(), kFixedSize)) return Error{EINVAL, "cache entry: short head"};
  // Each text takes at least its 4-byte length: counts beyond that are lies.
  if ((vary + 2 * fields) * 4 > rest.size() || head.status < 100 || head.status > 999) {
    return Error{EINVAL, "cache entry: bad head"};
  }
  Reader reader(rest);
  bool ok = reader.text(&head.key);
  head.vary.resize(vary);
  for (std::string& name : head.vary) ok = ok && reader.text(&name);
  ok = ok && reader.text(&head.variant);
  head.fields.resize(fields);
  for (auto& [name, value] : head.fields) ok = ok && reader.text(&name) && reader.text(&value);
  if (!ok || !reader.done()) return Error{EINVAL, "cache entry: bad head"};
  return head;
}

}  // namespace tern::cache
