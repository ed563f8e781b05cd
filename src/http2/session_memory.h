// http2::session_memory(): the allocator nghttp2 is given for its sessions.
//
// nghttp2 allocates and frees about fifteen small blocks per request (the
// stream, the frames it queues, a copy of the response's fields, decoded
// header strings), which malloc and free took about 8% of a small h2c
// request's instructions to serve. Here they come from free lists of the
// calling thread, one per size class (64 bytes to 4 KiB, doubling); larger
// blocks go to malloc. A session lives on one loop thread, so its blocks
// come and go on that thread's lists; a block freed on another thread joins
// that thread's lists, which is as good.
//
// Bounded: a thread keeps at most kMaxKeptBytes of free blocks and frees the
// rest. Under AddressSanitizer a kept block is poisoned, so a use after free
// inside nghttp2 is still reported.
#pragma once

#include <nghttp2/nghttp2.h>

#include <cstddef>

namespace tern::http2 {

inline constexpr size_t kMaxKeptBytes = 1 << 20;

// For nghttp2_session_server_new3 (and _client_new3).
nghttp2_mem* session_memory();

// What the calling thread's free lists hold (for tests).
struct KeptMemory {
  size_t blocks = 0;
  size_t bytes = 0;
};
KeptMemory kept_memory();

}  // namespace tern::http2
