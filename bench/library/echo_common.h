// What the echo servers of bench/library share, so that they take the
// same flags, announce themselves the same way and arm the same timers
// (and the floors, with no library, listen the same way):
//
//   NAME --port P --threads T    serve (port 0: the kernel picks one)
//   NAME --timers N              time arming and cancelling N timers, exit
//
// Header-only and free of any network library, so that each server still
// builds alone against its own library.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// A listening socket on 127.0.0.1:*port; with port 0, *port becomes the
// one the kernel chose; non-blocking. -1 on failure (errno set). For the
// floors, which have no library to make one.
inline int listen_on(int* port, bool reuse_port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (reuse_port) ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(*port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(fd, SOMAXCONN) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    return -1;
  }
  *port = ntohs(address.sin_port);
  return fd;
}

// One listener per thread on the same port (SO_REUSEPORT when more than
// one), as listen_on makes them; *port as there. Empty, after a line on
// stderr naming the program, when one cannot be made.
inline std::vector<int> listen_all(int threads, int* port, const char* program) {
  std::vector<int> listeners;
  for (int i = 0; i < threads; ++i) {
    const int fd = listen_on(port, threads > 1);
    if (fd < 0) {
      std::fprintf(stderr, "%s: listen on port %d: %s\n", program, *port, std::strerror(errno));
      for (int open_fd : listeners) ::close(open_fd);
      return {};
    }
    listeners.push_back(fd);
  }
  return listeners;
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
