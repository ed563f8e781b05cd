// udp_echo: sends every datagram back to where it came from.
//
//   udp_echo --port 7001
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "net/event_loop.h"
#include "net/udp_server.h"

using namespace tern::net;

int main(int argc, char** argv) {
  int port = 7001;
  if (argc == 3 && std::strcmp(argv[1], "--port") == 0) {
    port = std::atoi(argv[2]);
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: %s [--port N]\n", argv[0]);
    return 2;
  }

  EventLoop loop;
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
