// Buffer: a growable byte buffer for socket input and output.
//
//   +-------------------+------------------+------------------+
//   | prependable bytes |  readable bytes  |  writable bytes  |
//   +-------------------+------------------+------------------+
//   0      <=      reader_     <=     writer_     <=     capacity_
//
// The layout is muduo's: reading advances reader_, writing advances writer_,
// and a few bytes stay free at the front so a protocol can prepend a length
// or header without moving the payload. Growth first slides the readable bytes
// back to the front and reallocates only when that is not enough. Storage is
// not zero-filled on growth.
//
// read_fd() reads with readv into the free space plus a 64 KiB stack area, so
// one system call drains a socket even when the buffer is small, and a buffer
// only grows by what actually arrived.
//
// Not thread-safe: a Buffer belongs to one connection on one loop.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

namespace tern::net {

class Buffer {
 public:
  static constexpr size_t kCheapPrepend = 8;      // free bytes kept in front, for prepend()
  static constexpr size_t kInitialSize = 2048;    // a new buffer's default capacity
  static constexpr size_t kSpillSize = 64 * 1024;  // read_fd's stack area
  // What one buffer holds at most (its offsets are 32 bits: a buffer is
  // 24 bytes, and a connection has several). Larger bodies go to files.
  static constexpr size_t kMaxCapacity = UINT32_MAX;

  // initial_size 0 allocates nothing until the first append.
  explicit Buffer(size_t initial_size = kInitialSize);
  // A moved-from Buffer is empty and usable (it allocates again on append).
  Buffer(Buffer&& other) noexcept { swap(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    Buffer(std::move(other)).swap(*this);
    return *this;
  }

  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  size_t readable_bytes() const { return writer_ - reader_; }  // bytes held, to be read
  size_t writable_bytes() const { return capacity_ - writer_; }  // free bytes behind them
  size_t prependable_bytes() const { return reader_; }           // free bytes in front of them
  size_t capacity() const { return capacity_; }                  // bytes allocated
  bool empty() const { return reader_ == writer_; }              // nothing to read

  // The readable bytes, in place: valid until the buffer is next changed.
  const char* peek() const { return data_.get() + reader_; }
  std::string_view view() const { return {peek(), readable_bytes()}; }

  // Position of the first "\r\n" at or after `start` (the first readable
  // byte when not given), or nullptr.
  const char* find_crlf() const { return find_crlf(peek()); }
  const char* find_crlf(const char* start) const;
  // Position of the first line feed ("\n") in the readable bytes, or
  // nullptr.
  const char* find_eol() const;

  // Consuming: drops the first `len` readable bytes, those before `end`, or
  // all of them; retrieve_as_string() and retrieve_all_as_string() return
  // what they drop.
  void retrieve(size_t len);
  void retrieve_until(const char* end);
  void retrieve_all() { reader_ = writer_ = capacity_ == 0 ? 0 : kCheapPrepend; }
  std::string retrieve_as_string(size_t len);
  std::string retrieve_all_as_string() { return retrieve_as_string(readable_bytes()); }

  // Appending.
  void append(std::string_view data) { append(data.data(), data.size()); }
  void append(const void* data, size_t len) {
    // Inline fast path: the response writer appends many short pieces.
    if (len <= writable_bytes() && len > 0) {
      std::memcpy(begin_write(), data, len);
      writer_ += static_cast<uint32_t>(len);
      return;
    }
    append_slow(data, len);
  }
  // Writing in place: ensure_writable() makes room for `len` bytes at
  // begin_write(), has_written() counts those written there; unwrite()
  // takes back the last `len` bytes.
  void ensure_writable(size_t len) {
    if (writable_bytes() < len) make_space(len);
  }
  char* begin_write() { return data_.get() + writer_; }
  void has_written(size_t len) { writer_ += static_cast<uint32_t>(len); }
  void unwrite(size_t len);

  // Prepending into the reserved front space; len must fit.
  void prepend(const void* data, size_t len);

  // Integers in network byte order.
  void append_u8(uint8_t v) { append(&v, 1); }
  void append_u16(uint16_t v);
  void append_u32(uint32_t v);
  void append_u64(uint64_t v);
  uint8_t peek_u8() const;
  uint16_t peek_u16() const;
  uint32_t peek_u32() const;
  uint64_t peek_u64() const;

  // Releases memory beyond what the readable bytes plus `reserve` need. Used
  // by pooled connections so that one large transfer does not pin memory.
  void shrink(size_t reserve);

  void swap(Buffer& other) noexcept;  // exchanges the two buffers' contents and storage

  // Memory hand-over for pools (BufferPool): an empty buffer gives up its
  // storage and is left with none; a buffer with none adopts storage.
  struct Storage {
    std::unique_ptr<char[]> data;  // the bytes
    size_t capacity = 0;           // how many
  };
  Storage release_storage();            // an empty buffer's storage, given up
  void adopt_storage(Storage storage);  // storage for a buffer that has none

  // Reads from fd into the buffer (see class comment). Returns bytes read, 0
  // on end of stream, -1 with *saved_errno on error. *capacity_offered, if
  // given, receives how much the call could have read: a result below it means
  // the socket was drained.
  ssize_t read_fd(int fd, int* saved_errno, size_t* capacity_offered = nullptr);

 private:
  void make_space(size_t len);
  void append_slow(const void* data, size_t len);

  // With no storage yet (capacity 0), reader_ == writer_ == 0.
  std::unique_ptr<char[]> data_;
  uint32_t capacity_ = 0;
  uint32_t reader_ = 0;
  uint32_t writer_ = 0;
};

}  // namespace tern::net
