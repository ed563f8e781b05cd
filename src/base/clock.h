// CachedClock: a clock read once per loop iteration.
//
// Each EventLoop owns one CachedClock and updates it after every wait for
// events, so everything that runs in the same dispatch round (timer deadlines,
// the Date header, idle-timeout refreshes) agrees on "now" without calling
// clock_gettime per request. The value is at most one dispatch round old.
// Loop thread only, like the loop that owns it.
#pragma once

#include <chrono>
#include <cstdint>

namespace tern {

class CachedClock {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;  // for deadlines and durations
  using WallTime = std::chrono::system_clock::time_point;    // for dates

  CachedClock() { update(); }

  // Reads both clocks (the loop calls it after each wait for events).
  void update() {
    steady_ = std::chrono::steady_clock::now();
    wall_ = std::chrono::system_clock::now();
  }

  // The times read at the last update().
  SteadyTime now() const { return steady_; }
  WallTime wall_now() const { return wall_; }

  // Milliseconds on the steady clock (CLOCK_MONOTONIC), the unit of timer ticks.
  uint64_t now_ms() const { return to_ms(steady_); }
  // Wall-clock seconds since the Unix epoch.
  int64_t wall_seconds() const {
    return std::chrono::duration_cast<std::chrono::seconds>(wall_.time_since_epoch()).count();
  }

  // A steady time in the milliseconds of now_ms().
  static uint64_t to_ms(SteadyTime t) {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count());
  }

 private:
  SteadyTime steady_;
  WallTime wall_;
};

}  // namespace tern
