#include "http2/session_memory.h"

#include <sanitizer/asan_interface.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace tern::http2 {
namespace {

// Every block starts with this, ahead of what nghttp2 is given; 16 bytes,
// so that what nghttp2 gets is aligned as malloc's.
struct alignas(16) Header {
  uint32_t size_class;  // kUnpooled for a block from malloc alone
  size_t size;          // what nghttp2 asked for (realloc copies this much)
};
static_assert(sizeof(Header) == 16);

constexpr size_t kSmallest = 64;
constexpr uint32_t kClasses = 7;  // 64, 128, ..., 4096
constexpr uint32_t kUnpooled = UINT32_MAX;

constexpr size_t class_capacity(uint32_t c) { return kSmallest << c; }

// The smallest class that holds `size`, or kClasses if none does.
constexpr uint32_t class_of(size_t size) {
  if (size <= kSmallest) return 0;
  const size_t c = static_cast<size_t>(std::bit_width((size - 1) / kSmallest));
  return c < kClasses ? static_cast<uint32_t>(c) : kClasses;
}
static_assert(class_of(1) == 0 && class_of(64) == 0 && class_of(65) == 1 && class_of(128) == 1 &&
              class_of(129) == 2 && class_of(4096) == 6 && class_of(4097) == kClasses);

Header* header_of(void* p) { return reinterpret_cast<Header*>(static_cast<char*>(p) - sizeof(Header)); }
void* payload_of(Header* h) { return reinterpret_cast<char*>(h) + sizeof(Header); }

// Under AddressSanitizer only the bytes asked for can be used: the rest of
// the block, and all of a kept block, are poisoned (no-ops otherwise).
void mark_in_use(void* p, size_t size, size_t capacity) {
  ASAN_UNPOISON_MEMORY_REGION(p, size);
  ASAN_POISON_MEMORY_REGION(static_cast<char*>(p) + size, capacity - size);
}

// A kept block links to the next through its payload's first word.
struct FreeLists {
  std::array<void*, kClasses> head{};
  KeptMemory kept;

  FreeLists() = default;
  FreeLists(const FreeLists&) = delete;
  FreeLists& operator=(const FreeLists&) = delete;
  ~FreeLists() {
    for (void*& first : head) {
      while (first != nullptr) {
        void* next = pop_link(first);
        std::free(header_of(first));
        first = next;
      }
    }
  }

  static void* pop_link(void* p) {
    ASAN_UNPOISON_MEMORY_REGION(p, sizeof(void*));
    void* next;
    std::memcpy(&next, p, sizeof next);
    return next;
  }
  static void push_link(void* p, void* next, size_t capacity) {
    ASAN_UNPOISON_MEMORY_REGION(p, sizeof(void*));
    std::memcpy(p, &next, sizeof next);
    ASAN_POISON_MEMORY_REGION(p, capacity);
  }
};

thread_local FreeLists lists;

void* allocate(size_t size, void* /*user_data*/) {
  const uint32_t c = class_of(size);
  if (c < kClasses && lists.head[c] != nullptr) {
    void* p = lists.head[c];
    lists.head[c] = FreeLists::pop_link(p);
    lists.kept.blocks -= 1;
    lists.kept.bytes -= class_capacity(c);
    header_of(p)->size = size;
    mark_in_use(p, size, class_capacity(c));
    return p;
  }
  const size_t capacity = c < kClasses ? class_capacity(c) : size;
  auto* h = static_cast<Header*>(std::malloc(sizeof(Header) + capacity));
  if (h == nullptr) return nullptr;
  h->size_class = c < kClasses ? c : kUnpooled;
  h->size = size;
  mark_in_use(payload_of(h), size, capacity);
  return payload_of(h);
}

void release(void* p, void* /*user_data*/) {
  if (p == nullptr) return;
  Header* h = header_of(p);
  const uint32_t c = h->size_class;
  if (c == kUnpooled || lists.kept.bytes + class_capacity(c) > kMaxKeptBytes) {
    if (c != kUnpooled) ASAN_UNPOISON_MEMORY_REGION(p, class_capacity(c));  // malloc's own again
    return std::free(h);
  }
  FreeLists::push_link(p, lists.head[c], class_capacity(c));
  lists.head[c] = p;
  lists.kept.blocks += 1;
  lists.kept.bytes += class_capacity(c);
}

void* allocate_zeroed(size_t count, size_t size, void* user_data) {
  if (size != 0 && count > SIZE_MAX / size) return nullptr;
  void* p = allocate(count * size, user_data);
  if (p != nullptr) std::memset(p, 0, count * size);
  return p;
}

void* reallocate(void* p, size_t size, void* user_data) {
  if (p == nullptr) return allocate(size, user_data);
  Header* h = header_of(p);
  if (h->size_class != kUnpooled && size <= class_capacity(h->size_class)) {
    mark_in_use(p, size, class_capacity(h->size_class));
    h->size = size;
    return p;
  }
  void* q = allocate(size, user_data);
  if (q == nullptr) return nullptr;
  std::memcpy(q, p, std::min(h->size, size));
  release(p, user_data);
  return q;
}

nghttp2_mem memory{nullptr, &allocate, &release, &allocate_zeroed, &reallocate};

}  // namespace

nghttp2_mem* session_memory() { return &memory; }

KeptMemory kept_memory() { return lists.kept; }

}  // namespace tern::http2
