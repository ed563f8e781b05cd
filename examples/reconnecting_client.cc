// reconnecting_client: keeps a connection to a server, sending a line every
// second and printing what comes back. Stop the server and start it again:
// the client retries with growing, jittered delays and carries on.
//
//   reconnecting_client --host 127.0.0.1 --port 7000 [--io epoll|io_uring]
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "net/buffer.h"
#include "net/event_loop.h"
#include "net/signal_set.h"
#include "net/tcp_client.h"
#include "net/tcp_connection.h"

using namespace tern::net;

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 7000;
  IoBackend io = IoBackend::kDefault;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--host") host = argv[i + 1];
    if (flag == "--port") port = std::atoi(argv[i + 1]);
    if (flag == "--io") io = parse_io_backend(argv[i + 1]).value_or(IoBackend::kDefault);
  }
  auto server = InetAddress::from_ip_port(host, static_cast<uint16_t>(port));
  if (!server) {
    std::fprintf(stderr, "reconnecting_client: bad address %s\n", host.c_str());
    return 2;
  }

  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // one line at a time, even into a pipe
  EventLoop loop(io);
  // SIGINT or SIGTERM ends the loop; what main made then closes, in order.
  SignalSet stop(&loop, {SIGINT, SIGTERM}, [&loop](int) { loop.quit(); });
  TcpClientOptions options;
  options.reconnect = true;
  TcpClient client(&loop, *server, options);
  client.set_connection_callback([](TcpConnection& conn) {
    std::printf("%s %s\n", conn.connected() ? "connected to" : "lost",
                conn.peer_address().to_ip_port().c_str());
  });
  client.set_message_callback([](TcpConnection&, Buffer& input) {
    std::printf("got: %s", input.retrieve_all_as_string().c_str());
  });
  client.set_connect_failed_callback([](const tern::Error& error, bool will_retry) {
    std::printf("%s%s\n", error.message().c_str(), will_retry ? ", retrying" : "");
  });
  client.connect();

  int sequence = 0;
  loop.run_every(std::chrono::seconds(1), [&] {
    if (TcpConnection* conn = client.connection()) conn->send("hello " + std::to_string(++sequence) + "\n");
  });
  loop.loop();
}
