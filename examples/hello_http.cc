// hello_http: an in-memory HTTP responder on the library's router, and a
// handler of its own that answers later.
//
//   hello_http --port 8081 --threads 1 [--io epoll|io_uring]
//   curl http://127.0.0.1:8081/hello
//   curl http://127.0.0.1:8081/later     # 100 ms on
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "http/http_server.h"
#include "net/event_loop.h"
#include "net/signal_set.h"

using namespace tern;

// Takes GET /later as an exchange and answers it from a timer 100 ms on:
// the shape of a handler that waits for an upstream or a task thread. The
// exchange is found again by its id; if the client left meanwhile, there
// is none, and nothing is sent.
class Later final : public http::RequestHandler {
 public:
  http::Claim claim(http::Route& route) override {
    return route.path == "/later" ? http::Claim::kExchange : http::Claim::kPass;
  }
  void start(const http::Route&, http::Exchange& exchange) override {
    const http::ExchangeId id = exchange.id();
    exchange.loop()->run_after(std::chrono::milliseconds(100), [id] {
      http::Exchange* ex = http::Exchange::find(id);
      if (ex == nullptr) return;
      ex->writer().start(200).header("Content-Type", "text/plain; charset=utf-8").body("later\n");
      ex->finish();
    });
  }
};

int main(int argc, char** argv) {
  int port = 8081;
  http::HttpServerOptions options;
  net::IoBackend io = net::IoBackend::kDefault;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--port") port = std::atoi(argv[i + 1]);
    if (flag == "--threads") options.tcp.io_threads = std::atoi(argv[i + 1]);
    if (flag == "--io") io = net::parse_io_backend(argv[i + 1]).value_or(net::IoBackend::kDefault);
  }

  net::EventLoop loop(io);
  // SIGINT or SIGTERM ends the loop; what main made then closes, in order.
  net::SignalSet stop(&loop, {SIGINT, SIGTERM}, [&loop](int) { loop.quit(); });
  http::HttpServer server(&loop, net::InetAddress(static_cast<uint16_t>(port), true), options);
  server.get("/hello", [](const http::Request&, http::ResponseWriter& w) {
    w.start(200).header("Content-Type", "text/plain; charset=utf-8").body("Hello, world!\n");
  });
  server.get("/echo-query", [](const http::Request& request, http::ResponseWriter& w) {
    w.start(200).header("Content-Type", "text/plain; charset=utf-8").body(request.query());
  });
  server.post("/echo", [](const http::Request& request, http::ResponseWriter& w) {
    w.start(200).header("Content-Type", "application/octet-stream").body(request.body());
  });
  server.add_handler(std::make_unique<Later>());  // after the router
  if (auto started = server.start(); !started) {
    std::fprintf(stderr, "hello_http: %s\n", started.error().message().c_str());
    return 1;
  }
  std::printf("hello_http listening on %s\n", server.listen_address().to_ip_port().c_str());
  std::fflush(stdout);
  loop.loop();
}
