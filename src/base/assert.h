// Assertions for bugs: broken invariants and calls from the wrong thread.
//
// TERN_CHECK stays on in release builds (it costs a compare and a predictable
// branch); TERN_DCHECK is compiled out with NDEBUG. A failed check writes one
// line with file, line and condition to stderr, flushes the log and aborts.
// Expected runtime failures (peer resets, bad input) are Result values, never
// assertions.
#pragma once

#include <fmt/format.h>

#include <string>

namespace tern::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* condition,
                               const std::string& message);
}  // namespace tern::detail

#define TERN_CHECK(cond)                                                 \
  do {                                                                   \
    if (__builtin_expect(!(cond), 0))                                    \
      ::tern::detail::check_failed(__FILE__, __LINE__, #cond, std::string()); \
  } while (0)

#define TERN_CHECK_MSG(cond, ...)                                        \
  do {                                                                   \
    if (__builtin_expect(!(cond), 0))                                    \
      ::tern::detail::check_failed(__FILE__, __LINE__, #cond,            \
                                   ::fmt::format(__VA_ARGS__));          \
  } while (0)

#ifdef NDEBUG
#define TERN_DCHECK(cond) \
  do {                    \
    (void)sizeof(cond);   \
  } while (0)
#else
#define TERN_DCHECK(cond) TERN_CHECK(cond)
#endif
