#include "net/buffer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

namespace tern::net {
namespace {

constexpr size_t kDefaultCapacity = Buffer::kCheapPrepend + Buffer::kInitialSize;

std::string pattern(size_t len, uint32_t seed = 1) {
  std::string s(len, '\0');
  uint32_t x = seed;
  for (auto& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

// A connected AF_UNIX stream pair; closes whatever is still open.
struct SocketPair {
  int fds[2] = {-1, -1};
  SocketPair() {
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) fds[0] = fds[1] = -1;
  }
  ~SocketPair() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
  int reader() const { return fds[0]; }
  int writer() const { return fds[1]; }
  void close_writer() {
    ::close(fds[1]);
    fds[1] = -1;
  }
};

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  ASSERT_GE(flags, 0);
  ASSERT_EQ(::fcntl(fd, F_SETFL, flags | O_NONBLOCK), 0);
}

// Writes all of data without blocking, or fails the test.
void write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    ASSERT_GT(n, 0) << "write stalled after " << done << " bytes: " << std::strerror(errno);
    done += static_cast<size_t>(n);
  }
}

TEST(Buffer, NewBufferHasInitialSizeAndCheapPrepend) {
  Buffer b;
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.readable_bytes(), 0u);
  EXPECT_EQ(b.writable_bytes(), Buffer::kInitialSize);
  EXPECT_EQ(b.prependable_bytes(), Buffer::kCheapPrepend);
  EXPECT_EQ(b.capacity(), kDefaultCapacity);
}

TEST(Buffer, AppendThenRetrieveInPieces) {
  Buffer b;
  b.append(std::string(200, 'x'));
  EXPECT_EQ(b.readable_bytes(), 200u);
  EXPECT_EQ(b.writable_bytes(), Buffer::kInitialSize - 200);

  EXPECT_EQ(b.retrieve_as_string(50), std::string(50, 'x'));
  EXPECT_EQ(b.readable_bytes(), 150u);
  EXPECT_EQ(b.prependable_bytes(), Buffer::kCheapPrepend + 50);

  b.append("tail");
  EXPECT_EQ(b.retrieve_all_as_string(), std::string(150, 'x') + "tail");
  EXPECT_TRUE(b.empty());
}

TEST(Buffer, RetrievingEverythingResetsToTheFront) {
  Buffer b;
  b.append(std::string(300, 'a'));
  b.retrieve(100);
  b.retrieve(200);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.prependable_bytes(), Buffer::kCheapPrepend);
  EXPECT_EQ(b.writable_bytes(), Buffer::kInitialSize);
}

TEST(Buffer, RetrieveUntilConsumesUpToPointer) {
  Buffer b;
  b.append("line one\r\nline two");
  b.retrieve_until(b.find_crlf() + 2);
  EXPECT_EQ(b.view(), "line two");
}

TEST(Buffer, AppendSlidesReadableBytesWhenFrontSpaceSuffices) {
  Buffer b;
  const std::string data = pattern(2000);
  b.append(data);
  b.retrieve(1500);  // 500 readable, 48 writable, 1508 prependable
  ASSERT_EQ(b.writable_bytes(), 48u);

  b.append(std::string(1000, 'z'));
  EXPECT_EQ(b.capacity(), kDefaultCapacity) << "slid, not reallocated";
  EXPECT_EQ(b.prependable_bytes(), Buffer::kCheapPrepend);
  EXPECT_EQ(b.readable_bytes(), 1500u);
  EXPECT_EQ(b.writable_bytes(), kDefaultCapacity - Buffer::kCheapPrepend - 1500);
  EXPECT_EQ(b.view(), data.substr(1500) + std::string(1000, 'z'));
}

TEST(Buffer, AppendReallocatesToDoubleWhenSlidingIsNotEnough) {
  Buffer b;
  const std::string data = pattern(2000);
  b.append(data);
  b.retrieve(100);  // 1900 readable; 48 + 108 free in total
  b.append(std::string(500, 'z'));
  EXPECT_EQ(b.capacity(), 2 * kDefaultCapacity);
  EXPECT_EQ(b.prependable_bytes(), Buffer::kCheapPrepend);
  EXPECT_EQ(b.readable_bytes(), 2400u);
  EXPECT_EQ(b.view(), data.substr(100) + std::string(500, 'z'));
}

TEST(Buffer, AppendLargerThanDoubleGrowsToExactlyWhatIsNeeded) {
  Buffer b(16);
  b.append(std::string(1000, 'q'));
  EXPECT_EQ(b.capacity(), Buffer::kCheapPrepend + 1000);
  EXPECT_EQ(b.writable_bytes(), 0u);
  EXPECT_EQ(b.view(), std::string(1000, 'q'));
}

TEST(Buffer, ZeroSizedBufferAllocatesNothingUntilTheFirstAppend) {
  Buffer b(0);
  EXPECT_EQ(b.capacity(), 0u);
  EXPECT_EQ(b.writable_bytes(), 0u);
  EXPECT_TRUE(b.empty());
  b.append("x");
  EXPECT_EQ(b.view(), "x");
  EXPECT_GE(b.capacity(), Buffer::kCheapPrepend + 1);
  EXPECT_EQ(b.prependable_bytes(), Buffer::kCheapPrepend);
  b.retrieve_all();
  EXPECT_TRUE(b.empty());
}

TEST(Buffer, EnsureWritableOnAnEmptyZeroSizedBufferAllocates) {
  // Regression: growing from no storage copied zero bytes from a null
  // pointer (UBSan: null passed to memcpy).
  Buffer b(0);
  b.ensure_writable(64);
  EXPECT_GE(b.writable_bytes(), 64u);
  b.shrink(0);
  EXPECT_EQ(b.capacity(), 0u);
  b.append("after shrink");
  EXPECT_EQ(b.view(), "after shrink");
}

TEST(Buffer, EnsureWritableThenWriteDirectly) {
  Buffer b(4);
  b.ensure_writable(100);
  ASSERT_GE(b.writable_bytes(), 100u);
  std::memcpy(b.begin_write(), "direct", 6);
  b.has_written(6);
  EXPECT_EQ(b.view(), "direct");
}

TEST(Buffer, UnwriteDropsTheLastBytes) {
  Buffer b;
  b.append("hello world");
  b.unwrite(6);
  EXPECT_EQ(b.view(), "hello");
  b.append("!");
  EXPECT_EQ(b.view(), "hello!");
}

TEST(Buffer, PrependFillsTheReservedFrontWithoutMovingPayload) {
  Buffer b;
  b.append("payload");
  const char* payload = b.peek();
  const uint32_t len = 0x01020304;
  b.prepend(&len, sizeof len);
  EXPECT_EQ(b.peek(), payload - 4);
  EXPECT_EQ(b.prependable_bytes(), Buffer::kCheapPrepend - 4);
  EXPECT_EQ(b.readable_bytes(), 4 + 7u);
  EXPECT_EQ(b.view().substr(4), "payload");

  b.prepend("abcd", 4);  // exactly fills the reserve
  EXPECT_EQ(b.prependable_bytes(), 0u);
  EXPECT_EQ(b.view().substr(0, 4), "abcd");
}

TEST(Buffer, RetrievedSpaceCanBePrependedInto) {
  Buffer b;
  b.append("0123456789");
  b.retrieve(10 - 1);  // keep "9"; 17 bytes in front
  b.prepend("header:", 7);
  EXPECT_EQ(b.view(), "header:9");
}

TEST(Buffer, NetworkOrderIntegersRoundTrip) {
  Buffer b;
  b.append_u8(0xab);
  b.append_u16(0x1234);
  b.append_u32(0xdeadbeef);
  b.append_u64(0x0102030405060708ull);
  ASSERT_EQ(b.readable_bytes(), 1u + 2 + 4 + 8);
  EXPECT_EQ(b.view(), std::string("\xab\x12\x34\xde\xad\xbe\xef\x01\x02\x03\x04\x05\x06\x07\x08",
                                  15));

  EXPECT_EQ(b.peek_u8(), 0xab);
  b.retrieve(1);
  EXPECT_EQ(b.peek_u16(), 0x1234);
  b.retrieve(2);
  EXPECT_EQ(b.peek_u32(), 0xdeadbeefu);
  b.retrieve(4);
  EXPECT_EQ(b.peek_u64(), 0x0102030405060708ull);
  b.retrieve(8);
  EXPECT_TRUE(b.empty());
}

TEST(BufferDeathTest, PeekingAnIntegerLongerThanTheReadableBytesAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Buffer b;
  b.append("abc");
  EXPECT_DEATH((void)b.peek_u32(), "check failed");
}

TEST(BufferDeathTest, PrependingMoreThanTheFrontSpaceAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Buffer b;
  b.append("x");
  EXPECT_DEATH(b.prepend("123456789", 9), "check failed");
}

TEST(Buffer, FindCrlfFindsFirstLineEnd) {
  Buffer b;
  b.append("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  const char* first = b.find_crlf();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first - b.peek(), 14);
  const char* second = b.find_crlf(first + 2);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second - b.peek(), 23);
  const char* third = b.find_crlf(second + 1);
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(third - b.peek(), 25);
  EXPECT_EQ(b.find_crlf(third + 1), nullptr);
}

TEST(Buffer, FindCrlfIgnoresCrAtTheVeryEndUntilLfArrives) {
  Buffer b;
  b.append("abc\r");
  EXPECT_EQ(b.find_crlf(), nullptr);
  b.append("\n");
  ASSERT_NE(b.find_crlf(), nullptr);
  EXPECT_EQ(b.find_crlf() - b.peek(), 3);
}

TEST(Buffer, FindCrlfSkipsCrNotFollowedByLf) {
  Buffer b;
  b.append("a\rb\r\rc\r\nd");
  ASSERT_NE(b.find_crlf(), nullptr);
  EXPECT_EQ(b.find_crlf() - b.peek(), 6);

  Buffer doubled;
  doubled.append("\r\r\n");
  ASSERT_NE(doubled.find_crlf(), nullptr);
  EXPECT_EQ(doubled.find_crlf() - doubled.peek(), 1);
}

TEST(Buffer, FindCrlfDoesNotMatchBareLf) {
  Buffer b;
  b.append("abc\ndef");
  EXPECT_EQ(b.find_crlf(), nullptr);
}

TEST(Buffer, FindCrlfOnEmptyBufferOrAtEndIsNull) {
  Buffer b;
  EXPECT_EQ(b.find_crlf(), nullptr);
  EXPECT_EQ(b.find_eol(), nullptr);
  b.append("x\r\n");
  EXPECT_EQ(b.find_crlf(b.peek() + b.readable_bytes()), nullptr);
}

TEST(Buffer, FindCrlfIsRelativeToUnreadBytes) {
  Buffer b;
  b.append("old\r\nnew\r\n");
  b.retrieve(5);
  ASSERT_NE(b.find_crlf(), nullptr);
  EXPECT_EQ(b.find_crlf() - b.peek(), 3);
}

TEST(Buffer, FindEolFindsFirstLf) {
  Buffer b;
  b.append("a\r\nb\nc");
  ASSERT_NE(b.find_eol(), nullptr);
  EXPECT_EQ(b.find_eol() - b.peek(), 2);
  b.retrieve(3);
  EXPECT_EQ(b.find_eol() - b.peek(), 1);
  b.retrieve(2);
  EXPECT_EQ(b.find_eol(), nullptr);
}

TEST(Buffer, ShrinkReleasesSpaceBeyondReserveAndKeepsData) {
  Buffer b;
  const std::string data = pattern(10000);
  b.append(data);
  b.retrieve(9000);
  ASSERT_GT(b.capacity(), 10000u);
  b.shrink(0);
  EXPECT_EQ(b.capacity(), Buffer::kCheapPrepend + 1000);
  EXPECT_EQ(b.prependable_bytes(), Buffer::kCheapPrepend);
  EXPECT_EQ(b.view(), data.substr(9000));

  b.shrink(100);  // would need to grow: no change
  EXPECT_EQ(b.capacity(), Buffer::kCheapPrepend + 1000);
  b.append("more");
  EXPECT_EQ(b.view(), data.substr(9000) + "more");
}

TEST(Buffer, ShrinkWithReserveLeavesThatMuchWritable) {
  Buffer b;
  b.append(std::string(5000, 'y'));
  b.retrieve(4000);
  b.shrink(64);
  EXPECT_EQ(b.capacity(), Buffer::kCheapPrepend + 1000 + 64);
  EXPECT_EQ(b.writable_bytes(), 64u);
  EXPECT_EQ(b.view(), std::string(1000, 'y'));
}

TEST(Buffer, SwapExchangesContentsAndCapacity) {
  Buffer a;
  Buffer b(10000);
  a.append("first");
  b.append("second");
  b.retrieve(1);
  a.swap(b);
  EXPECT_EQ(a.view(), "econd");
  EXPECT_EQ(a.capacity(), Buffer::kCheapPrepend + 10000);
  EXPECT_EQ(b.view(), "first");
  EXPECT_EQ(b.capacity(), kDefaultCapacity);
}

TEST(Buffer, MoveTransfersContents) {
  Buffer a;
  a.append("moved");
  Buffer b(std::move(a));
  EXPECT_EQ(b.view(), "moved");
  Buffer c;
  c = std::move(b);
  EXPECT_EQ(c.view(), "moved");
}

// BUG (src/net/buffer.h: the defaulted move constructor/assignment): a
// moved-from Buffer keeps capacity_, reader_ and writer_ but has a null data_,
// so it reports stale readable bytes and its next append() memcpy()s into
// nullptr + 8. Disabled until fixed.
TEST(Buffer, MovedFromBufferIsEmptyAndReusable) {
  Buffer a;
  a.append("moved");
  Buffer b(std::move(a));
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): this is the point
  ASSERT_EQ(a.readable_bytes(), 0u);
  ASSERT_EQ(a.writable_bytes(), 0u) << "a null buffer must not claim writable space";
  a.append("again");
  EXPECT_EQ(a.view(), "again");
}

TEST(BufferReadFd, SmallReadLandsInTheBuffer) {
  SocketPair sp;
  ASSERT_GE(sp.reader(), 0);
  write_all(sp.writer(), "hello");
  Buffer b;
  int err = 0;
  size_t offered = 0;
  EXPECT_EQ(b.read_fd(sp.reader(), &err, &offered), 5);
  EXPECT_EQ(b.view(), "hello");
  EXPECT_EQ(offered, Buffer::kInitialSize + Buffer::kSpillSize);
  EXPECT_EQ(b.capacity(), kDefaultCapacity) << "no growth for a read that fits";
}

TEST(BufferReadFd, ReadBiggerThanWritableSpillsInOneCall) {
  SocketPair sp;
  ASSERT_GE(sp.reader(), 0);
  const int big = 1 << 20;
  ASSERT_EQ(::setsockopt(sp.writer(), SOL_SOCKET, SO_SNDBUF, &big, sizeof big), 0);
  set_nonblocking(sp.writer());
  const std::string data = pattern(100 * 1024, 7);
  write_all(sp.writer(), data);

  Buffer b;
  int err = 0;
  size_t offered = 0;
  const ssize_t n = b.read_fd(sp.reader(), &err, &offered);
  // One readv fills the 2 KiB of free space and the whole 64 KiB spill area.
  EXPECT_EQ(offered, Buffer::kInitialSize + Buffer::kSpillSize);
  ASSERT_EQ(n, static_cast<ssize_t>(offered));
  EXPECT_EQ(b.readable_bytes(), offered);
  EXPECT_EQ(b.view(), std::string_view(data).substr(0, offered));

  // The rest arrives in a second call; the result is below what was offered,
  // which tells the caller the socket is drained.
  const ssize_t m = b.read_fd(sp.reader(), &err, &offered);
  ASSERT_EQ(static_cast<size_t>(n + m), data.size());
  EXPECT_LT(static_cast<size_t>(m), offered);
  EXPECT_EQ(b.view(), data);
}

TEST(BufferReadFd, PartialSpillGrowsByWhatArrived) {
  SocketPair sp;
  ASSERT_GE(sp.reader(), 0);
  const std::string data = pattern(10000, 3);
  write_all(sp.writer(), data);
  Buffer b;
  b.append("prefix");
  int err = 0;
  ASSERT_EQ(b.read_fd(sp.reader(), &err), 10000);
  EXPECT_EQ(b.view(), "prefix" + data);
}

TEST(BufferReadFd, LargeWritableSpaceSkipsTheSpillArea) {
  SocketPair sp;
  ASSERT_GE(sp.reader(), 0);
  write_all(sp.writer(), "abc");
  Buffer b(Buffer::kSpillSize + 100);
  int err = 0;
  size_t offered = 0;
  EXPECT_EQ(b.read_fd(sp.reader(), &err, &offered), 3);
  EXPECT_EQ(offered, Buffer::kSpillSize + 100);
  EXPECT_EQ(b.view(), "abc");
}

TEST(BufferReadFd, EndOfStreamReturnsZero) {
  SocketPair sp;
  ASSERT_GE(sp.reader(), 0);
  write_all(sp.writer(), "last");
  sp.close_writer();
  Buffer b;
  int err = 0;
  EXPECT_EQ(b.read_fd(sp.reader(), &err), 4);
  EXPECT_EQ(b.read_fd(sp.reader(), &err), 0);
  EXPECT_EQ(b.view(), "last");
}

TEST(BufferReadFd, EmptyNonBlockingSocketReturnsEagain) {
  SocketPair sp;
  ASSERT_GE(sp.reader(), 0);
  set_nonblocking(sp.reader());
  Buffer b;
  b.append("keep");
  int err = 0;
  EXPECT_EQ(b.read_fd(sp.reader(), &err), -1);
  EXPECT_EQ(err, EAGAIN);
  EXPECT_EQ(b.view(), "keep");
}

TEST(BufferReadFd, BadDescriptorReportsErrno) {
  Buffer b;
  int err = 0;
  EXPECT_EQ(b.read_fd(-1, &err), -1);
  EXPECT_EQ(err, EBADF);
  EXPECT_TRUE(b.empty());
}

TEST(BufferReadFd, WorksOnPipes) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  ASSERT_EQ(::write(p[1], "piped", 5), 5);
  ::close(p[1]);
  Buffer b;
  int err = 0;
  EXPECT_EQ(b.read_fd(p[0], &err), 5);
  EXPECT_EQ(b.read_fd(p[0], &err), 0);
  ::close(p[0]);
  EXPECT_EQ(b.view(), "piped");
}

}  // namespace
}  // namespace tern::net
