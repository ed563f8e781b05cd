// asio_echo: the Boost.Asio peer of the library comparison (README.md).
//
//   asio_echo --port 0 --threads 2
//   asio_echo --timers 100000
//
// The session is Asio's own echo pattern: async_read_some into a 64 KiB
// buffer, async_write of what came (the composed write finishes partial
// writes), then read again.
//
// --threads T > 1: one io_context per thread, each with its own acceptor on
// the same port (SO_REUSEPORT). Of Asio's two usual layouts this is the
// faster one: a single io_context run by T threads shares one scheduler
// queue and its lock between them, and a connection's handlers hop between
// threads. Per-thread listeners also let the kernel spread connections as it
// does for the other peers.
#include <sys/socket.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "echo_common.h"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  explicit Session(tcp::socket socket) : socket_(std::move(socket)) {}

  void start() { read(); }

 private:
  void read() {
    auto self = shared_from_this();
    socket_.async_read_some(asio::buffer(buffer_), [self](boost::system::error_code ec, size_t n) {
      if (!ec) self->write(n);
    });
  }

  void write(size_t n) {
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(buffer_, n), [self](boost::system::error_code ec, size_t) {
      if (!ec) self->read();
    });
  }

  tcp::socket socket_;
  std::array<char, 64 * 1024> buffer_;
};

class Server {
 public:
  explicit Server(tcp::acceptor acceptor) : acceptor_(std::move(acceptor)) { accept(); }

 private:
  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (!ec) {
        socket.set_option(tcp::no_delay(true), ec);
        std::make_shared<Session>(std::move(socket))->start();
      }
      accept();
    });
  }

  tcp::acceptor acceptor_;
};

tcp::acceptor listen(asio::io_context& io, uint16_t port, bool reuse_port) {
  using reuse_port_option = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;
  tcp::acceptor acceptor(io);
  const tcp::endpoint endpoint(asio::ip::make_address_v4("127.0.0.1"), port);
  acceptor.open(endpoint.protocol());
  acceptor.set_option(tcp::acceptor::reuse_address(true));
  if (reuse_port) acceptor.set_option(reuse_port_option(true));
  acceptor.bind(endpoint);
  acceptor.listen(SOMAXCONN);
  return acceptor;
}

int time_timers(size_t n) {
  const std::vector<uint32_t> delays = echo_bench::timer_delays_ms(n);
  asio::io_context io(1);
  // One timer object per deadline, as Asio code keeps one per operation;
  // constructing it is part of arming. The handlers never run: cancel()
  // only queues them with operation_aborted, and the io_context is not run.
  std::vector<asio::steady_timer> timers;
  timers.reserve(n);
  const auto start = echo_bench::Clock::now();
  for (size_t i = 0; i < n; ++i) {
    asio::steady_timer& timer = timers.emplace_back(io, std::chrono::milliseconds(delays[i]));
    timer.async_wait([](boost::system::error_code) {});
  }
  const auto armed = echo_bench::Clock::now();
  for (auto& timer : timers) timer.cancel();
  const auto cancelled = echo_bench::Clock::now();
  echo_bench::print_timer_result(n, armed - start, cancelled - armed);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  echo_bench::Flags flags;
  if (!echo_bench::parse_flags(argc, argv, &flags)) return 2;
  if (flags.timers > 0) return time_timers(static_cast<size_t>(flags.timers));

  try {
    // Concurrency hint 1: each io_context is run by one thread only.
    std::vector<std::unique_ptr<asio::io_context>> contexts;
    std::vector<std::unique_ptr<Server>> servers;
    uint16_t port = static_cast<uint16_t>(flags.port);
    for (int i = 0; i < flags.threads; ++i) {
      auto& io = *contexts.emplace_back(std::make_unique<asio::io_context>(1));
      tcp::acceptor acceptor = listen(io, port, flags.threads > 1);
      port = acceptor.local_endpoint().port();  // port 0: the others join the one the first got
      servers.push_back(std::make_unique<Server>(std::move(acceptor)));
    }
    echo_bench::announce(port);
    std::vector<std::thread> threads;
    for (size_t i = 1; i < contexts.size(); ++i) threads.emplace_back([&io = *contexts[i]] { io.run(); });
    contexts[0]->run();
    for (auto& thread : threads) thread.join();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "asio_echo: %s\n", e.what());
    return 1;
  }
}
