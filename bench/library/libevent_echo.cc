// libevent_echo: the libevent peer of the library comparison (README.md).
//
//   libevent_echo --port 0 --threads 2
//   libevent_echo --timers 100000
//
// Connections are bufferevents, libevent's own answer to buffered socket
// I/O: the read callback moves the input evbuffer's chains onto the output
// evbuffer (no copy), and the bufferevent writes them out when the socket
// is writable, queuing what it does not take. Reads are allowed up to
// 64 KiB (bufferevent_set_max_single_read), though libevent 2.1's
// evbuffer_read itself takes at most 4096 bytes a call.
//
// --threads T > 1: one event_base per thread, each with its own listener on
// the same port (LEV_OPT_REUSEABLE_PORT). No base is touched by another
// thread, so libevent's locking stays off (no evthread_use_pthreads).
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <csignal>
#include <cstdio>
#include <thread>
#include <vector>

#include "echo_common.h"

namespace {

void on_read(bufferevent* bev, void*) { evbuffer_add_buffer(bufferevent_get_output(bev), bufferevent_get_input(bev)); }

void on_event(bufferevent* bev, short events, void*) {
  if (events & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) bufferevent_free(bev);
}

void on_accept(evconnlistener* listener, evutil_socket_t fd, sockaddr*, int, void*) {
  int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  bufferevent* bev = bufferevent_socket_new(evconnlistener_get_base(listener), fd, BEV_OPT_CLOSE_ON_FREE);
  if (bev == nullptr) {
    evutil_closesocket(fd);
    return;
  }
  bufferevent_set_max_single_read(bev, 64 * 1024);
  bufferevent_set_max_single_write(bev, 64 * 1024);
  bufferevent_setcb(bev, on_read, nullptr, on_event, nullptr);
  bufferevent_enable(bev, EV_READ | EV_WRITE);
}

int time_timers(size_t n) {
  const std::vector<uint32_t> delays = echo_bench::timer_delays_ms(n);
  event_base* base = event_base_new();
  std::vector<event*> timers(n);
  const auto start = echo_bench::Clock::now();
  for (size_t i = 0; i < n; ++i) {
    timers[i] = evtimer_new(base, [](evutil_socket_t, short, void*) {}, nullptr);
    const timeval delay{static_cast<time_t>(delays[i] / 1000), static_cast<suseconds_t>(delays[i] % 1000 * 1000)};
    evtimer_add(timers[i], &delay);
  }
  const auto armed = echo_bench::Clock::now();
  for (event* timer : timers) evtimer_del(timer);
  const auto cancelled = echo_bench::Clock::now();
  echo_bench::print_timer_result(n, armed - start, cancelled - armed);
  for (event* timer : timers) event_free(timer);
  event_base_free(base);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  echo_bench::Flags flags;
  if (!echo_bench::parse_flags(argc, argv, &flags)) return 2;
  if (flags.timers > 0) return time_timers(static_cast<size_t>(flags.timers));

  // bufferevents write with writev(2): a peer gone mid-write must be an
  // EPIPE, not the end of the process (libevent leaves SIGPIPE to the
  // application).
  std::signal(SIGPIPE, SIG_IGN);
  std::vector<event_base*> bases;
  int port = flags.port;
  unsigned options = LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE;
  if (flags.threads > 1) options |= LEV_OPT_REUSEABLE_PORT;
  for (int i = 0; i < flags.threads; ++i) {
    event_base* base = bases.emplace_back(event_base_new());
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    evconnlistener* listener = evconnlistener_new_bind(base, on_accept, nullptr, options, SOMAXCONN,
                                                       reinterpret_cast<sockaddr*>(&address), sizeof address);
    if (listener == nullptr) {
      std::fprintf(stderr, "libevent_echo: listen on port %d failed\n", port);
      return 1;
    }
    sockaddr_in bound{};
    socklen_t length = sizeof bound;
    getsockname(evconnlistener_get_fd(listener), reinterpret_cast<sockaddr*>(&bound), &length);
    port = ntohs(bound.sin_port);  // port 0: the others join the one the first got
  }
  echo_bench::announce(port);
  std::vector<std::thread> threads;
  for (size_t i = 1; i < bases.size(); ++i) threads.emplace_back([base = bases[i]] { event_base_dispatch(base); });
  event_base_dispatch(bases[0]);
  for (auto& thread : threads) thread.join();
}
