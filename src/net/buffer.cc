#include "net/buffer.h"

#include <endian.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>

#include "base/assert.h"
#include "net/sockets.h"

namespace tern::net {

Buffer::Buffer(size_t initial_size) {
  if (initial_size == 0) return;
  TERN_CHECK(initial_size <= kMaxCapacity - kCheapPrepend);
  data_ = std::make_unique_for_overwrite<char[]>(kCheapPrepend + initial_size);
  capacity_ = static_cast<uint32_t>(kCheapPrepend + initial_size);
  reader_ = writer_ = kCheapPrepend;
}

const char* Buffer::find_crlf(const char* start) const {
  TERN_DCHECK(peek() <= start && start <= peek() + readable_bytes());
  const char* end = data_.get() + writer_;
  while (start < end) {
    auto* cr = static_cast<const char*>(std::memchr(start, '\r', static_cast<size_t>(end - start)));
    if (cr == nullptr || cr + 1 >= end) return nullptr;
    if (cr[1] == '\n') return cr;
    start = cr + 1;
  }
  return nullptr;
}

const char* Buffer::find_eol() const {
  return static_cast<const char*>(std::memchr(peek(), '\n', readable_bytes()));
}

void Buffer::retrieve(size_t len) {
  TERN_DCHECK(len <= readable_bytes());
  if (len < readable_bytes()) {
    reader_ += static_cast<uint32_t>(len);
  } else {
    retrieve_all();
  }
}

void Buffer::retrieve_until(const char* end) {
  TERN_DCHECK(peek() <= end && end <= peek() + readable_bytes());
  retrieve(static_cast<size_t>(end - peek()));
}

std::string Buffer::retrieve_as_string(size_t len) {
  TERN_DCHECK(len <= readable_bytes());
  std::string s(peek(), len);
  retrieve(len);
  return s;
}

void Buffer::append_slow(const void* data, size_t len) {
  ensure_writable(len);
  if (len > 0) std::memcpy(begin_write(), data, len);
  has_written(len);
}

void Buffer::unwrite(size_t len) {
  TERN_DCHECK(len <= readable_bytes());
  writer_ -= static_cast<uint32_t>(len);
}

void Buffer::prepend(const void* data, size_t len) {
  TERN_CHECK(len <= prependable_bytes());
  reader_ -= static_cast<uint32_t>(len);
  std::memcpy(data_.get() + reader_, data, len);
}

void Buffer::append_u16(uint16_t v) {
  v = htobe16(v);
  append(&v, sizeof v);
}
void Buffer::append_u32(uint32_t v) {
  v = htobe32(v);
  append(&v, sizeof v);
}
void Buffer::append_u64(uint64_t v) {
  v = htobe64(v);
  append(&v, sizeof v);
}

uint8_t Buffer::peek_u8() const {
  TERN_CHECK(readable_bytes() >= 1);
  return static_cast<uint8_t>(*peek());
}
uint16_t Buffer::peek_u16() const {
  TERN_CHECK(readable_bytes() >= sizeof(uint16_t));
  uint16_t v;
  std::memcpy(&v, peek(), sizeof v);
  return be16toh(v);
}
uint32_t Buffer::peek_u32() const {
  TERN_CHECK(readable_bytes() >= sizeof(uint32_t));
  uint32_t v;
  std::memcpy(&v, peek(), sizeof v);
  return be32toh(v);
}
uint64_t Buffer::peek_u64() const {
  TERN_CHECK(readable_bytes() >= sizeof(uint64_t));
  uint64_t v;
  std::memcpy(&v, peek(), sizeof v);
  return be64toh(v);
}

void Buffer::make_space(size_t len) {
  size_t readable = readable_bytes();
  if (capacity_ != 0 && writable_bytes() + prependable_bytes() >= len + kCheapPrepend) {
    // Enough room overall: slide the readable bytes to the front.
    std::memmove(data_.get() + kCheapPrepend, peek(), readable);
  } else {
    TERN_CHECK_MSG(len <= kMaxCapacity - kCheapPrepend - readable, "a Buffer holds at most {} bytes",
                   kMaxCapacity);
    const size_t wanted = kCheapPrepend + readable + len;
    const size_t capacity = std::min(std::max(size_t{capacity_} * 2, wanted), kMaxCapacity);
    auto data = std::make_unique_for_overwrite<char[]>(capacity);
    if (readable > 0) std::memcpy(data.get() + kCheapPrepend, peek(), readable);
    data_ = std::move(data);
    capacity_ = static_cast<uint32_t>(capacity);
  }
  reader_ = kCheapPrepend;
  writer_ = static_cast<uint32_t>(kCheapPrepend + readable);
}

void Buffer::shrink(size_t reserve) {
  size_t wanted = kCheapPrepend + readable_bytes() + reserve;
  if (capacity_ <= wanted) return;
  if (readable_bytes() == 0 && reserve == 0) {
    data_.reset();
    capacity_ = reader_ = writer_ = 0;
    return;
  }
  auto data = std::make_unique_for_overwrite<char[]>(wanted);
  if (readable_bytes() > 0) std::memcpy(data.get() + kCheapPrepend, peek(), readable_bytes());
  writer_ = static_cast<uint32_t>(kCheapPrepend + readable_bytes());
  reader_ = kCheapPrepend;
  data_ = std::move(data);
  capacity_ = static_cast<uint32_t>(wanted);
}

Buffer::Storage Buffer::release_storage() {
  TERN_DCHECK(empty());
  Storage storage{std::move(data_), capacity_};
  capacity_ = reader_ = writer_ = 0;
  return storage;
}

void Buffer::adopt_storage(Storage storage) {
  TERN_DCHECK(capacity_ == 0 && storage.capacity > kCheapPrepend && storage.capacity <= kMaxCapacity);
  data_ = std::move(storage.data);
  capacity_ = static_cast<uint32_t>(storage.capacity);
  reader_ = writer_ = kCheapPrepend;
}

void Buffer::swap(Buffer& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(capacity_, other.capacity_);
  std::swap(reader_, other.reader_);
  std::swap(writer_, other.writer_);
}

ssize_t Buffer::read_fd(int fd, int* saved_errno, size_t* capacity_offered) {
  char spill[kSpillSize];
  const size_t writable = writable_bytes();
  iovec vec[2];
  vec[0].iov_base = begin_write();
  vec[0].iov_len = writable;
  vec[1].iov_base = spill;
  vec[1].iov_len = sizeof spill;
  // When the buffer already has 64 KiB free, the spill area adds nothing.
  const int count = writable < sizeof spill ? 2 : 1;
  if (capacity_offered) *capacity_offered = writable + (count == 2 ? sizeof spill : 0);

  ssize_t n = sockets::readv(fd, vec, count, saved_errno);
  if (n <= 0) return n;
  if (static_cast<size_t>(n) <= writable) {
    has_written(static_cast<size_t>(n));
  } else {
    writer_ = capacity_;
    append(spill, static_cast<size_t>(n) - writable);
  }
  return n;
}

}  // namespace tern::net
