// echo_server: sends every byte back.
//
//   echo_server --port 7000 --threads 4 --mode reuseport --trigger edge --io io_uring
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "net/buffer.h"
#include "net/event_loop.h"
#include "net/inet_address.h"
#include "net/signal_set.h"
#include "net/tcp_connection.h"
#include "net/tcp_server.h"

using namespace tern::net;

static int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--port N] [--threads N] [--mode dispatch|reuseport] "
               "[--trigger level|edge] [--io epoll|io_uring]\n",
               argv0);
  return 2;
}

int main(int argc, char** argv) {
  int port = 7000;
  TcpServerOptions options;
  options.name = "echo";
  IoBackend io = IoBackend::kDefault;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) return usage(argv[0]);
    std::string value = argv[++i];
    if (flag == "--port") {
      port = std::atoi(value.c_str());
    } else if (flag == "--threads") {
      options.io_threads = std::atoi(value.c_str());
    } else if (flag == "--mode" && (value == "dispatch" || value == "reuseport")) {
      options.accept_mode = value == "dispatch" ? AcceptMode::kDispatch : AcceptMode::kReusePort;
    } else if (flag == "--trigger" && (value == "level" || value == "edge")) {
      options.trigger = value == "level" ? TriggerMode::kLevel : TriggerMode::kEdge;
    } else if (flag == "--io" && parse_io_backend(value)) {
      io = *parse_io_backend(value);
    } else {
      return usage(argv[0]);
    }
  }

  EventLoop loop(io);  // its server's worker loops use the same backend
  // SIGINT or SIGTERM ends the loop; what main made then closes, in order.
  SignalSet stop(&loop, {SIGINT, SIGTERM}, [&loop](int) { loop.quit(); });
  TcpServer server(&loop, InetAddress(static_cast<uint16_t>(port)), options);
  server.set_message_callback([](TcpConnection& conn, Buffer& input) { conn.send(input); });
  if (auto started = server.start(); !started) {
    std::fprintf(stderr, "echo_server: %s\n", started.error().message().c_str());
    return 1;
  }
  std::printf("echo_server listening on %s\n", server.listen_address().to_ip_port().c_str());
  std::fflush(stdout);
  loop.loop();
}
