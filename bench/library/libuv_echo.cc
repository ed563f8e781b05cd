// libuv_echo: the libuv peer of the library comparison (README.md).
//
//   libuv_echo --port 0 --threads 2
//   libuv_echo --timers 100000
//
// Reads go into the connection's 64 KiB buffer (uv_read_start's suggested
// size). Each read is echoed with uv_try_write, and what the socket does not
// take at once is copied into a uv_write request, which libuv queues and
// finishes; uv_try_write refuses while anything is queued, so the order
// holds. The buffer is then free for the next read: no allocation per read
// while the socket keeps up.
//
// --threads T > 1: one uv_loop_t per thread, each with its own listener on
// the same port. libuv 1.44 has no flag for SO_REUSEPORT, so the socket is
// made first (uv_tcp_init_ex) and the option set on its descriptor.
#include <sys/socket.h>
#include <uv.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "echo_common.h"

namespace {

struct Connection {
  uv_tcp_t tcp;  // first: the handle's address is the connection's
  char buffer[64 * 1024];
};

// A write libuv finishes later: the request, with the bytes it sends right
// behind it in the same allocation.
struct WriteRequest {
  uv_write_t req;  // first: libuv hands back its address
  uv_buf_t buf;
  char* data() { return reinterpret_cast<char*>(this + 1); }
};

void on_closed(uv_handle_t* handle) { delete reinterpret_cast<Connection*>(handle); }

void close_connection(uv_stream_t* stream) {
  auto* handle = reinterpret_cast<uv_handle_t*>(stream);
  if (!uv_is_closing(handle)) uv_close(handle, on_closed);
}

void on_written(uv_write_t* req, int status) {
  // Queued writes of a closing connection come back with UV_ECANCELED.
  if (status < 0 && status != UV_ECANCELED) close_connection(req->handle);
  std::free(req);
}

void on_alloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  auto* conn = reinterpret_cast<Connection*>(handle);
  *buf = uv_buf_init(conn->buffer, sizeof conn->buffer);
}

void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  if (nread < 0) {  // UV_EOF or an error
    close_connection(stream);
    return;
  }
  if (nread == 0) return;  // EAGAIN
  uv_buf_t out = uv_buf_init(buf->base, static_cast<unsigned>(nread));
  int written = uv_try_write(stream, &out, 1);
  if (written == nread) return;
  if (written == UV_EAGAIN) {
    written = 0;
  } else if (written < 0) {
    close_connection(stream);
    return;
  }
  const size_t rest = static_cast<size_t>(nread) - static_cast<size_t>(written);
  auto* request = static_cast<WriteRequest*>(std::malloc(sizeof(WriteRequest) + rest));
  std::memcpy(request->data(), buf->base + written, rest);
  request->buf = uv_buf_init(request->data(), static_cast<unsigned>(rest));
  if (uv_write(&request->req, stream, &request->buf, 1, on_written) != 0) {
    std::free(request);
    close_connection(stream);
  }
}

void on_connection(uv_stream_t* listener, int status) {
  if (status < 0) return;
  auto* conn = new Connection;
  uv_tcp_init(listener->loop, &conn->tcp);
  auto* stream = reinterpret_cast<uv_stream_t*>(&conn->tcp);
  if (uv_accept(listener, stream) != 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(&conn->tcp), on_closed);
    return;
  }
  uv_tcp_nodelay(&conn->tcp, 1);
  uv_read_start(stream, on_alloc, on_read);
}

struct Worker {
  uv_loop_t loop;
  uv_tcp_t listener;
};

// Binds and listens on 127.0.0.1:*port; with port 0, *port becomes the one
// the kernel chose. Returns a libuv error code.
int listen_on(Worker* worker, int* port, bool reuse_port) {
  int rc = uv_tcp_init_ex(&worker->loop, &worker->listener, AF_INET);
  if (rc != 0) return rc;
  if (reuse_port) {
    uv_os_fd_t fd;
    int on = 1;
    if ((rc = uv_fileno(reinterpret_cast<uv_handle_t*>(&worker->listener), &fd)) != 0) return rc;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) return uv_translate_sys_error(errno);
  }
  sockaddr_in address;
  uv_ip4_addr("127.0.0.1", *port, &address);
  if ((rc = uv_tcp_bind(&worker->listener, reinterpret_cast<const sockaddr*>(&address), 0)) != 0) return rc;
  if ((rc = uv_listen(reinterpret_cast<uv_stream_t*>(&worker->listener), SOMAXCONN, on_connection)) != 0) return rc;
  sockaddr_storage bound;
  int length = sizeof bound;
  if ((rc = uv_tcp_getsockname(&worker->listener, reinterpret_cast<sockaddr*>(&bound), &length)) != 0) return rc;
  *port = ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  return 0;
}

int time_timers(size_t n) {
  const std::vector<uint32_t> delays = echo_bench::timer_delays_ms(n);
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::vector<uv_timer_t> timers(n);
  const auto start = echo_bench::Clock::now();
  for (size_t i = 0; i < n; ++i) {
    uv_timer_init(&loop, &timers[i]);
    uv_timer_start(&timers[i], [](uv_timer_t*) {}, delays[i], 0);
  }
  const auto armed = echo_bench::Clock::now();
  for (auto& timer : timers) uv_timer_stop(&timer);
  const auto cancelled = echo_bench::Clock::now();
  echo_bench::print_timer_result(n, armed - start, cancelled - armed);
  // Untimed: close the handles (one loop round runs their close callbacks),
  // then the loop, so that nothing is left for a leak checker to find.
  for (auto& timer : timers) uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  echo_bench::Flags flags;
  if (!echo_bench::parse_flags(argc, argv, &flags)) return 2;
  if (flags.timers > 0) return time_timers(static_cast<size_t>(flags.timers));

  // libuv writes with write(2): a peer gone mid-write must be an EPIPE, not
  // the end of the process (libuv leaves SIGPIPE to the application).
  std::signal(SIGPIPE, SIG_IGN);
  std::vector<std::unique_ptr<Worker>> workers;
  int port = flags.port;
  for (int i = 0; i < flags.threads; ++i) {
    Worker& worker = *workers.emplace_back(std::make_unique<Worker>());
    uv_loop_init(&worker.loop);
    if (int rc = listen_on(&worker, &port, flags.threads > 1); rc != 0) {
      std::fprintf(stderr, "libuv_echo: listen on port %d: %s\n", port, uv_strerror(rc));
      return 1;
    }
  }
  echo_bench::announce(port);
  // A loop may be made on one thread and run on another, as long as only
  // that one touches it from then on.
  std::vector<std::thread> threads;
  for (size_t i = 1; i < workers.size(); ++i) {
    threads.emplace_back([loop = &workers[i]->loop] { uv_run(loop, UV_RUN_DEFAULT); });
  }
  uv_run(&workers[0]->loop, UV_RUN_DEFAULT);
  for (auto& thread : threads) thread.join();
}
