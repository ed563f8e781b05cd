// udp_echo: sends every datagram back to where it came from.
//
//   udp_echo --port 7001 [--io epoll|io_uring]
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "net/event_loop.h"
#include "net/signal_set.h"
#include "net/udp_server.h"

using namespace tern::net;

int main(int argc, char** argv) {
  int port = 7001;
  IoBackend io = IoBackend::kDefault;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 < argc && std::strcmp(argv[i], "--port") == 0) {
      port = std::atoi(argv[i + 1]);
    } else if (i + 1 < argc && std::strcmp(argv[i], "--io") == 0 && parse_io_backend(argv[i + 1])) {
      io = *parse_io_backend(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--port N] [--io epoll|io_uring]\n", argv[0]);
      return 2;
    }
  }

  EventLoop loop(io);
  // SIGINT or SIGTERM ends the loop; what main made then closes, in order.
  SignalSet stop(&loop, {SIGINT, SIGTERM}, [&loop](int) { loop.quit(); });
  UdpServer server(&loop, InetAddress(static_cast<uint16_t>(port)));
  server.set_datagram_callback([](UdpServer& self, std::string_view data, const InetAddress& peer) {
    self.send_to(peer, data);  // replies to one batch leave in one sendmmsg
  });
  if (auto started = server.start(); !started) {
    std::fprintf(stderr, "udp_echo: %s\n", started.error().message().c_str());
    return 1;
  }
  std::printf("udp_echo listening on %s\n", server.local_address().to_ip_port().c_str());
  std::fflush(stdout);
  loop.loop();
}
