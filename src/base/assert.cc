#include "base/assert.h"

#include <cstdio>
#include <cstdlib>

#include "base/log.h"

namespace tern::detail {

void check_failed(const char* file, int line, const char* condition, const std::string& message) {
  // stderr first: the log may be asynchronous, and we are about to abort.
  std::fprintf(stderr, "tern: check failed at %s:%d: %s%s%s\n", file, line, condition,
               message.empty() ? "" : ": ", message.c_str());
  std::fflush(stderr);
  log::flush_for_abort();
  std::abort();
}

}  // namespace tern::detail
