#include "http2/session_memory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define TERN_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TERN_UNDER_ASAN 1
#endif
#endif

namespace tern::http2 {
namespace {

class SessionMemoryTest : public ::testing::Test {
 protected:
  void* allocate(size_t size) { return mem->malloc(size, mem->mem_user_data); }
  void release(void* p) { mem->free(p, mem->mem_user_data); }
  void* allocate_zeroed(size_t count, size_t size) { return mem->calloc(count, size, mem->mem_user_data); }
  void* reallocate(void* p, size_t size) { return mem->realloc(p, size, mem->mem_user_data); }

  nghttp2_mem* mem = session_memory();
};

TEST_F(SessionMemoryTest, AFreedBlockIsGivenAgainForTheNextOfItsSizeClass) {
  void* p = allocate(100);
  std::memset(p, 'x', 100);
  const KeptMemory before = kept_memory();  // what earlier tests left kept
  release(p);
  EXPECT_EQ(kept_memory().blocks, before.blocks + 1);
  EXPECT_EQ(kept_memory().bytes, before.bytes + 128);  // 100 bytes are of the 128-byte class
  void* q = allocate(120);
  EXPECT_EQ(q, p);
  EXPECT_EQ(kept_memory().blocks, before.blocks);
  void* other_class = allocate(40);
  EXPECT_NE(other_class, p);
  release(q);
  release(other_class);
}

TEST_F(SessionMemoryTest, EveryByteAskedForIsUsableAndAlignedAsMallocs) {
  // Under AddressSanitizer a byte past a block, or a block used after it
  // was kept, is reported.
  std::vector<void*> blocks;
  for (size_t size : {1u, 63u, 64u, 65u, 500u, 1024u, 4095u, 4096u, 4097u, 70000u}) {
    void* p = allocate(size);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u) << size;
    std::memset(p, 0xab, size);
    blocks.push_back(p);
  }
  for (void* p : blocks) release(p);
}

TEST_F(SessionMemoryTest, CallocZeroesABlockThatWasUsedBefore) {
  void* p = allocate(256);
  std::memset(p, 0xff, 256);
  release(p);
  auto* z = static_cast<unsigned char*>(allocate_zeroed(32, 8));
  EXPECT_EQ(static_cast<void*>(z), p);
  for (size_t i = 0; i < 256; ++i) ASSERT_EQ(z[i], 0) << i;
  release(z);
  EXPECT_EQ(allocate_zeroed(SIZE_MAX / 2, 4), nullptr);  // overflow: refused, not wrapped
}

TEST_F(SessionMemoryTest, ReallocKeepsTheBytesAcrossClassesAndPastThem) {
  auto* p = static_cast<char*>(allocate(50));
  const std::string text(50, 'q');
  std::memcpy(p, text.data(), text.size());
  EXPECT_EQ(reallocate(p, 60), p);  // still fits its block
  auto* grown = static_cast<char*>(reallocate(p, 3000));
  ASSERT_NE(grown, nullptr);
  EXPECT_EQ(std::string(grown, 50), text);
  std::memset(grown + 50, 'r', 2950);
  auto* large = static_cast<char*>(reallocate(grown, 100000));
  ASSERT_NE(large, nullptr);
  EXPECT_EQ(std::string(large, 50), text);
  EXPECT_EQ(std::string(large + 50, 2950), std::string(2950, 'r'));
  auto* shrunk = static_cast<char*>(reallocate(large, 20));  // a large block shrinks into a pooled one
  ASSERT_NE(shrunk, nullptr);
  EXPECT_EQ(std::string(shrunk, 20), text.substr(0, 20));
  release(shrunk);
  auto* fresh = static_cast<char*>(reallocate(nullptr, 10));
  ASSERT_NE(fresh, nullptr);
  release(fresh);
}

TEST_F(SessionMemoryTest, LargeBlocksAreNotKeptAndTheKeptTotalIsBounded) {
  const KeptMemory before = kept_memory();
  release(allocate(5000));
  EXPECT_EQ(kept_memory().blocks, before.blocks);

  std::vector<void*> blocks;
  for (size_t i = 0; i < 2 * kMaxKeptBytes / 4096; ++i) blocks.push_back(allocate(4096));
  for (void* p : blocks) release(p);
  EXPECT_LE(kept_memory().bytes, kMaxKeptBytes);
  EXPECT_GE(kept_memory().bytes, kMaxKeptBytes - 4096);
}

#ifdef TERN_UNDER_ASAN
TEST_F(SessionMemoryTest, UnderAsanABytePastTheSizeAndAKeptBlockAreReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto* p = static_cast<volatile char*>(allocate(100));
        p[100] = 1;  // inside the 128-byte block, past what was asked for
      },
      "use-after-poison");
  EXPECT_DEATH(
      {
        void* block = allocate(100);
        release(block);
        static_cast<volatile char*>(block)[10] = 1;  // kept, not given out
      },
      "use-after-poison");
  void* ok = allocate(100);
  static_cast<volatile char*>(ok)[99] = 1;
  release(ok);
}
#endif

}  // namespace
}  // namespace tern::http2
