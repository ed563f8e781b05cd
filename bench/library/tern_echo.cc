// tern_echo: the libtern peer of the library comparison (README.md).
//
//   tern_echo --port 0 --threads 2
//   tern_echo --timers 100000
//
// --threads 1: the base loop accepts and serves. --threads T > 1: T I/O loops,
// each with its own SO_REUSEPORT listener (AcceptMode::kReusePort), so that
// the kernel spreads connections over them as it does for the other three
// peers; the base loop then only waits.
//
// The loops wait with tern's default backend, io_uring where the kernel
// allows it; TERN_IO=epoll in the environment makes them use epoll, as the
// other three libraries do.
#include <chrono>
#include <cstdio>
#include <vector>

#include "echo_common.h"
#include "net/buffer.h"
#include "net/event_loop.h"
#include "net/inet_address.h"
#include "net/tcp_connection.h"
#include "net/tcp_server.h"
#include "net/timer_wheel.h"

using namespace tern::net;

namespace {

int time_timers(size_t n) {
  const std::vector<uint32_t> delays = echo_bench::timer_delays_ms(n);
  EventLoop loop;
  std::vector<TimerId> ids(n);
  const auto start = echo_bench::Clock::now();
  for (size_t i = 0; i < n; ++i) ids[i] = loop.run_after(std::chrono::milliseconds(delays[i]), [] {});
  const auto armed = echo_bench::Clock::now();
  for (TimerId id : ids) loop.cancel(id);
  const auto cancelled = echo_bench::Clock::now();
  echo_bench::print_timer_result(n, armed - start, cancelled - armed);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  echo_bench::Flags flags;
  if (!echo_bench::parse_flags(argc, argv, &flags)) return 2;
  if (flags.timers > 0) return time_timers(static_cast<size_t>(flags.timers));

  EventLoop loop;
  TcpServerOptions options;
  options.name = "tern_echo";
  if (flags.threads > 1) {
    options.io_threads = flags.threads;
    options.accept_mode = AcceptMode::kReusePort;
  }
  TcpServer server(&loop, InetAddress(static_cast<uint16_t>(flags.port), /*loopback_only=*/true), options);
  // Buffer::read_fd reads up to 64 KiB past the buffer's free space in one
  // call; send() writes at once and queues what the kernel does not take.
  server.set_message_callback([](TcpConnection& conn, Buffer& input) { conn.send(input); });
  if (auto started = server.start(); !started) {
    std::fprintf(stderr, "tern_echo: %s\n", started.error().message().c_str());
    return 1;
  }
  echo_bench::announce(server.listen_address().port());
  loop.loop();
}
