// tcp_proxy: relays each connection it accepts to a backend, bytes both
// ways, as a TCP load balancer does for one server.
//
//   tcp_proxy --port 7004 --to 127.0.0.1:7000 [--threads N] [--idle-timeout S] [--io epoll|io_uring]
//   echo_server --port 7000 &  nc 127.0.0.1 7004
//
// A Tunnel pairs the client's connection (accepted by a TcpServer) with a
// TcpClient to the backend, on the client's loop, so the two sides never
// cross threads. Back-pressure both ways: when one side has more than
// kHighWater bytes queued for it, the proxy stops reading the other side,
// and reads it again once that queue has drained (on_write_complete). The
// kernel's buffers then fill and TCP slows the sender down: a fast sender
// and a slow reader cost the proxy kHighWater per direction, not the
// difference of their speeds. Until the backend answers, the client is not
// read either.
//
// Closing: when one side closes, the other is sent what was queued for it
// and then a FIN (TcpConnection::shutdown); a backend that cannot be
// reached closes the client's connection. The tunnel goes once both sides
// are closed, or a side has been silent for --idle-timeout seconds (300).
// Unlike a load balancer that keeps half-open connections, a side's FIN
// ends the tunnel: libtern closes a connection whose peer has finished
// once what is queued for it is written, so an answer sent after a
// client's half-close (shutdown for writing) does not reach it.
//
// SIGINT or SIGTERM stops it: each loop's tunnels are closed on that loop
// first (a TcpClient is destroyed on its loop's thread), then the server
// closes what is left and stops its loops.
#include <any>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <latch>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "net/buffer.h"
#include "net/connection_table.h"
#include "net/event_loop.h"
#include "net/loop_local.h"
#include "net/signal_set.h"
#include "net/tcp_client.h"
#include "net/tcp_connection.h"
#include "net/tcp_server.h"

using namespace tern::net;

namespace {

constexpr size_t kHighWater = 1 << 20;

class Tunnel;
// The tunnels of one loop, owned there.
using Tunnels = std::unordered_map<const Tunnel*, std::unique_ptr<Tunnel>>;

class Tunnel {
 public:
  Tunnel(TcpConnection& client, const InetAddress& backend, std::chrono::seconds idle, Tunnels& owner)
      : loop_(client.loop()),
        client_(client.id()),
        idle_(idle),
        backend_(loop_, backend, backend_options()),
        owner_(owner) {
    backend_.set_connection_callback([this](TcpConnection& conn) { on_backend_connection(conn); });
    backend_.set_message_callback([this](TcpConnection& conn, Buffer& input) { relay(conn, input, find_client()); });
    backend_.set_write_complete_callback([this](TcpConnection&) { resume(find_client()); }, true);
    backend_.set_connect_failed_callback([this](const tern::Error& error, bool) {
      std::fprintf(stderr, "tcp_proxy: backend %s: %s\n", backend_.server().to_string().c_str(),
                   error.message().c_str());
      if (TcpConnection* c = find_client()) c->force_close();
      backend_closed_ = true;  // it never opened
    });
    client.set_idle_timeout(idle_);
    client.stop_reading();  // until the backend is connected
    backend_.connect();
  }

  // The client's side, from the server's callbacks.
  void on_client_message(TcpConnection& client, Buffer& input) {
    if (backend_closed_) return input.retrieve_all();  // nobody to take it
    // While the backend connects, what came stays in `input` (the client
    // is not read meanwhile, so that is one read's worth at most).
    if (TcpConnection* backend = backend_.connection()) relay(client, input, backend);
  }
  void on_client_write_complete() { resume(backend_.connection()); }
  // The proxy stops: the client's connection closes without its tunnel,
  // which goes next (and the backend's connection with it).
  void drop_client() {
    if (TcpConnection* client = find_client()) {
      client->context().reset();
      client->force_close();
    }
    client_closed_ = true;
  }
  void on_client_closed() {
    client_closed_ = true;
    if (TcpConnection* backend = backend_.connection()) {
      resume(backend);        // dropping what it still sends, until its FIN
      backend_.disconnect();  // a FIN once what the client sent is written
    } else {
      backend_.stop();
      backend_closed_ = true;
    }
    maybe_done();
  }

 private:
  static TcpClientOptions backend_options() {
    TcpClientOptions options;
    options.name = "backend";
    options.connector.retry = false;  // the client waits: fail it at once
    return options;
  }

  TcpConnection* find_client() { return client_closed_ ? nullptr : loop_->connections().find(client_); }

  void on_backend_connection(TcpConnection& backend) {
    TcpConnection* client = find_client();
    if (!backend.connected()) {
      backend_closed_ = true;
      if (client != nullptr) {
        // A FIN once what the backend sent is written; reading goes on (what
        // the client still sends is dropped) so that its own FIN is seen.
        resume(client);
        client->shutdown();
      }
      return maybe_done();
    }
    if (client == nullptr) return backend.shutdown();
    backend.set_idle_timeout(idle_);
    client->start_reading();
    if (client->input().readable_bytes() > 0) relay(*client, client->input(), &backend);
  }

  // Sends what `from` received to `to`; stops reading `from` while `to`
  // has too much queued, until `to` reports it has written it.
  static void relay(TcpConnection& from, Buffer& input, TcpConnection* to) {
    if (to == nullptr || !to->connected()) return input.retrieve_all();  // the other side is gone
    to->send(input);
    if (to->pending_output_bytes() > kHighWater) {
      from.stop_reading();
      to->ask_write_complete();
    }
  }
  // `to` has drained: read again what feeds it.
  void resume(TcpConnection* reader) {
    if (reader != nullptr && reader->connected() && !reader->is_reading()) reader->start_reading();
  }

  void maybe_done() {
    if (!client_closed_ || !backend_closed_) return;
    // Not from inside the backend's own callback: at the end of this round.
    loop_->queue_in_loop([&owner = owner_, self = this] { owner.erase(self); });
  }

  EventLoop* const loop_;
  const ConnectionId client_;
  const std::chrono::seconds idle_;
  TcpClient backend_;
  Tunnels& owner_;
  bool client_closed_ = false;
  bool backend_closed_ = false;
};

class TcpProxy {
 public:
  TcpProxy(EventLoop* loop, const InetAddress& listen, const InetAddress& backend, std::chrono::seconds idle,
           TcpServerOptions options)
      : backend_(backend), idle_(idle), server_(loop, listen, std::move(options)) {
    server_.set_thread_init_callback([this](EventLoop* io_loop) { tunnels_.emplace(io_loop); });
    server_.set_connection_callback([this](TcpConnection& conn) {
      if (conn.connected()) {
        Tunnels& mine = *tunnels_.get(conn.loop());
        auto tunnel = std::make_unique<Tunnel>(conn, backend_, idle_, mine);
        conn.context() = tunnel.get();
        mine.emplace(tunnel.get(), std::move(tunnel));
      } else if (Tunnel* tunnel = tunnel_of(conn)) {
        conn.context().reset();
        tunnel->on_client_closed();
      }
    });
    server_.set_message_callback([this](TcpConnection& conn, Buffer& input) {
      tunnel_of(conn)->on_client_message(conn, input);
    });
    server_.set_write_complete_callback([this](TcpConnection& conn) { tunnel_of(conn)->on_client_write_complete(); },
                                        true);
  }

  // On the base loop's thread, as the server is.
  ~TcpProxy() {
    const std::vector<EventLoop*>& loops = server_.io_loops();  // empty if it never started
    std::latch done(static_cast<std::ptrdiff_t>(loops.size()));
    for (EventLoop* io_loop : loops) {
      io_loop->run_in_loop([this, io_loop, &done] {
        if (Tunnels* mine = tunnels_.get(io_loop)) {
          for (auto& entry : *mine) entry.second->drop_client();
          mine->clear();
        }
        done.count_down();
      });
    }
    done.wait();
  }
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  tern::Result<void> start() { return server_.start(); }
  const InetAddress& listen_address() const { return server_.listen_address(); }

 private:
  static Tunnel* tunnel_of(TcpConnection& conn) {
    auto* tunnel = std::any_cast<Tunnel*>(&conn.context());
    return tunnel != nullptr ? *tunnel : nullptr;
  }

  const InetAddress backend_;
  const std::chrono::seconds idle_;
  LoopLocal<Tunnels> tunnels_;  // outlives the server, whose close callbacks use it
  TcpServer server_;
};

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s --to HOST:PORT [--port N] [--threads N] [--idle-timeout S] [--io epoll|io_uring]\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int port = 7004;
  std::optional<InetAddress> backend;
  std::chrono::seconds idle{300};
  TcpServerOptions options;
  options.name = "proxy";
  IoBackend io = IoBackend::kDefault;
  for (int i = 1; i < argc; i += 2) {
    std::string flag = argv[i];
    if (i + 1 >= argc) return usage(argv[0]);
    std::string value = argv[i + 1];
    if (flag == "--port") {
      port = std::atoi(value.c_str());
    } else if (flag == "--to") {
      auto parsed = InetAddress::parse(value);
      if (!parsed) return usage(argv[0]);
      backend = *parsed;
    } else if (flag == "--threads") {
      options.io_threads = std::atoi(value.c_str());
    } else if (flag == "--idle-timeout" && std::atoi(value.c_str()) > 0) {
      idle = std::chrono::seconds(std::atoi(value.c_str()));
    } else if (flag == "--io" && parse_io_backend(value)) {
      io = *parse_io_backend(value);
    } else {
      return usage(argv[0]);
    }
  }
  if (!backend) return usage(argv[0]);

  EventLoop loop(io);
  // SIGINT or SIGTERM ends the loop; what main made then closes, in order.
  SignalSet stop(&loop, {SIGINT, SIGTERM}, [&loop](int) { loop.quit(); });
  TcpProxy proxy(&loop, InetAddress(static_cast<uint16_t>(port)), *backend, idle, options);
  if (auto started = proxy.start(); !started) {
    std::fprintf(stderr, "tcp_proxy: %s\n", started.error().message().c_str());
    return 1;
  }
  std::printf("tcp_proxy listening on %s\n", proxy.listen_address().to_ip_port().c_str());
  std::fflush(stdout);
  loop.loop();
}
