// What the four echo servers of bench/library share, so that they take the
// same flags, announce themselves the same way and arm the same timers:
//
//   NAME --port P --threads T    serve (port 0: the kernel picks one)
//   NAME --timers N              time arming and cancelling N timers, exit
//
// Header-only and free of any network library, so that each server still
// builds alone against its own library.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace echo_bench {

struct Flags {
  int port = 0;
  int threads = 1;
  long timers = 0;  // > 0: the timer benchmark instead of the server
};

// Parses argv into *flags; on a bad flag prints the usage and returns false.
inline bool parse_flags(int argc, char** argv, Flags* flags) {
  auto usage = [&] {
    std::fprintf(stderr, "usage: %s [--port P] [--threads T] | --timers N\n", argv[0]);
    return false;
  };
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) return usage();
    const std::string flag = argv[i];
    char* end = nullptr;
    const long value = std::strtol(argv[i + 1], &end, 10);
    if (*end != '\0' || value < 0) return usage();
    if (flag == "--port" && value <= 65535) {
      flags->port = static_cast<int>(value);
    } else if (flag == "--threads" && value >= 1 && value <= 64) {
      flags->threads = static_cast<int>(value);
    } else if (flag == "--timers" && value >= 1) {
      flags->timers = value;
    } else {
      return usage();
    }
  }
  return true;
}

// The line the run script waits for before it starts the driver.
inline void announce(int port) {
  std::printf("listening on 127.0.0.1:%d\n", port);
  std::fflush(stdout);
}

// The timers' delays in milliseconds, 1 s to 60 s: the same sequence in every
// program (a fixed xorshift seed), so that each library sorts the same
// deadlines. Made before the clock starts, so that only the library is timed.
inline std::vector<uint32_t> timer_delays_ms(size_t n) {
  std::vector<uint32_t> delays(n);
  uint64_t state = 0x2545F4914F6CDD1Dull;
  for (auto& delay : delays) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    delay = 1000 + static_cast<uint32_t>(state % 59001);
  }
  return delays;
}

using Clock = std::chrono::steady_clock;

inline void print_timer_result(size_t n, Clock::duration arm, Clock::duration cancel) {
  auto per_timer = [n](Clock::duration d) {
    return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()) /
           static_cast<double>(n);
  };
  std::printf("{\"mode\":\"timers\",\"timers\":%zu,\"arm_ns_per_timer\":%.1f,\"cancel_ns_per_timer\":%.1f}\n", n,
              per_timer(arm), per_timer(cancel));
  std::fflush(stdout);
}

}  // namespace echo_bench
