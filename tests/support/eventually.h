// Test support: wait, polling, for a condition another thread makes true.
#pragma once

#include <chrono>
#include <thread>

namespace tern::testing {

// Polls `ready` every millisecond for up to `timeout`; whether it held.
template <typename F>
bool eventually(F ready, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return ready();
}

}  // namespace tern::testing
