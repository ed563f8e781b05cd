// https_server: an HTTP server over TLS, HTTP/2 to the clients that ask for
// it (ALPN "h2") and HTTP/1.1 to the others.
//
//   openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30
//       -subj /CN=localhost -addext subjectAltName=DNS:localhost -keyout key.pem -out cert.pem
//   https_server --port 8443 --cert cert.pem --key key.pem [--threads N]
//   curl --cacert cert.pem https://localhost:8443/hello
//
// A tls::ServerContext holds the certificate and makes a TLS layer for
// each connection accepted on the address it is set for; the HTTP server
// above it sees plaintext. Certificates that do not load stop the program
// with the reason (ServerContext throws, naming the file; exit code 2),
// before it listens.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

#include "http/http_server.h"
#include "http2/http2_connection.h"
#include "net/event_loop.h"
#include "net/signal_set.h"
#include "tls/server_context.h"

using namespace tern;

namespace {

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s --cert PEM --key PEM [--port N] [--threads N] [--io epoll|io_uring]\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int port = 8443;
  std::string cert_path;
  std::string key_path;
  http::HttpServerOptions options;
  net::IoBackend io = net::IoBackend::kDefault;
  for (int i = 1; i < argc; i += 2) {
    std::string flag = argv[i];
    if (i + 1 >= argc) return usage(argv[0]);
    std::string value = argv[i + 1];
    if (flag == "--port") {
      port = std::atoi(value.c_str());
    } else if (flag == "--cert") {
      cert_path = value;
    } else if (flag == "--key") {
      key_path = value;
    } else if (flag == "--threads") {
      options.tcp.io_threads = std::atoi(value.c_str());
    } else if (flag == "--io" && net::parse_io_backend(value)) {
      io = *net::parse_io_backend(value);
    } else {
      return usage(argv[0]);
    }
  }
  if (cert_path.empty() || key_path.empty()) return usage(argv[0]);

  std::shared_ptr<tls::ServerContext> tls_context;
  try {
    tls::Settings settings;
    tls::Identity identity;  // Mozilla's "intermediate" policy unless told otherwise
    identity.pairs.push_back({cert_path, key_path});  // paths of PEM files
    settings.identities.push_back(std::move(identity));
    settings.alpn = {"h2", "http/1.1"};
    tls_context = std::make_shared<tls::ServerContext>(std::move(settings));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "https_server: %s\n", error.what());
    return 2;
  }

  net::EventLoop loop(io);
  // SIGINT or SIGTERM ends the loop; what main made then closes, in order.
  net::SignalSet stop(&loop, {SIGINT, SIGTERM}, [&loop](int) { loop.quit(); });
  const net::InetAddress address(static_cast<uint16_t>(port));
  options.http2 = http2::http2_protocol();  // for the connections whose TLS agreed on "h2"
  http::HttpServer server(&loop, address, options);
  server.tcp_server().set_secure_context(address, tls_context);
  server.get("/hello", [](const http::Request& request, http::ResponseWriter& w) {
    w.start(200)
        .header("Content-Type", "text/plain; charset=utf-8")
        .header("Strict-Transport-Security", "max-age=31536000")
        .body("Hello over " + std::string(http::version_name(request.version())) + " and TLS\n");
  });
  if (auto started = server.start(); !started) {
    std::fprintf(stderr, "https_server: %s\n", started.error().message().c_str());
    return 1;
  }
  std::printf("https_server listening on %s\n", server.listen_address().to_ip_port().c_str());
  std::fflush(stdout);
  loop.loop();
}
