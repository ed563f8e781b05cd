// site_server: a site of one's own on the library's handlers: the files of
// a directory, its PHP scripts run by php-fpm, and /api/ passed to an
// application server, with a route of the program's own in front.
//
//   site_server --port 8080 --root ./www [--php unix:/run/php/php8.2-fpm.sock]
//               [--api 127.0.0.1:3000] [--stream 1] [--threads 2] [--io epoll|io_uring]
//   curl http://127.0.0.1:8080/                # ./www/index.html (or index.php)
//   curl http://127.0.0.1:8080/info.php/a/b    # ./www/info.php, PATH_INFO /a/b
//   curl http://127.0.0.1:8080/api/users?id=7  # 127.0.0.1:3000 GET /users?id=7
//   curl http://127.0.0.1:8080/healthz         # the program's own route
//
// --stream 1: bodies to and from php-fpm and the API stream through as they
// come (each side paused while the other is behind) instead of being
// buffered first, as nginx's are by default.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>

#include "fastcgi/script_handler.h"
#include "files/directory_handler.h"
#include "http/http_server.h"
#include "net/event_loop.h"
#include "net/signal_set.h"
#include "net/socket_address.h"
#include "proxy/forward_handler.h"

using namespace tern;

int main(int argc, char** argv) {
  int port = 8080;
  std::string root = ".", php, api;
  bool stream = false;
  http::HttpServerOptions options;
  net::IoBackend io = net::IoBackend::kDefault;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--port") port = std::atoi(argv[i + 1]);
    if (flag == "--root") root = argv[i + 1];
    if (flag == "--php") php = argv[i + 1];
    if (flag == "--api") api = argv[i + 1];
    if (flag == "--stream") stream = std::string(argv[i + 1]) == "1";
    if (flag == "--threads") options.tcp.io_threads = std::atoi(argv[i + 1]);
    if (flag == "--io") io = net::parse_io_backend(argv[i + 1]).value_or(net::IoBackend::kDefault);
  }

  net::EventLoop loop(io);
  net::SignalSet stop(&loop, {SIGINT, SIGTERM}, [&loop](int) { loop.quit(); });
  http::HttpServer server(&loop, net::InetAddress(static_cast<uint16_t>(port), true), options);
  server.get("/healthz", [](const http::Request&, http::ResponseWriter& w) {
    w.start(200).header("Content-Type", "text/plain; charset=utf-8").body("ok\n");
  });
  auto address = [](const std::string& text) {
    auto parsed = net::SocketAddress::parse(text);
    if (!parsed) throw std::invalid_argument("not an address: " + text);
    return *parsed;
  };
  try {
    // The handlers after the router, in the order they are asked: /api/
    // first, then the PHP scripts, then the files (which never send a
    // script's source: the scripts' handler answers every *.php path).
    if (!api.empty()) {
      proxy::ForwardHandlerOptions backend;
      backend.servers = {address(api)};
      backend.prefix = "/api/";
      backend.path = "/";  // "/api/users" is "/users" there
      backend.max_body = 64 << 20;  // uploads up to 64 MiB (the server's bound is 1 MiB)
      backend.buffering = !stream;
      server.add_handler(std::make_unique<proxy::ForwardHandler>(backend));
    }
    if (!php.empty()) {
      fastcgi::ScriptHandlerOptions scripts;
      scripts.application = address(php);
      scripts.root = root;
      scripts.buffering = !stream;
      server.add_handler(std::make_unique<fastcgi::ScriptHandler>(scripts));
    }
    files::StaticFilesOptions site;
    site.root = root;
    server.add_handler(std::make_unique<files::DirectoryHandler>("/", site));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "site_server: %s\n", e.what());
    return 2;
  }
  if (auto started = server.start(); !started) {
    std::fprintf(stderr, "site_server: %s\n", started.error().message().c_str());
    return 1;
  }
  std::printf("site_server listening on %s\n", server.listen_address().to_ip_port().c_str());
  std::fflush(stdout);
  loop.loop();
}
