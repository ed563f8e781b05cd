// The response head writer: status line, Server, Date, a few fields and
// the framing, serialised into a connection's output buffer.
#include <benchmark/benchmark.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "http/response_writer.h"
#include "http1/http1_output.h"
#include "net/buffer.h"
#include "net/connection_table.h"
#include "net/event_loop.h"
#include "net/socket.h"
#include "net/tcp_connection.h"

namespace {

using namespace tern;

// A connection object on a socketpair; nothing is ever sent.
struct Fixture {
  Fixture() {
    int fds[2];
    ::socketpair(AF_UNIX, SOCK_STREAM, 0, fds);
    peer = net::Socket(fds[1]);
    conn = loop.connections().open(net::Socket(fds[0]), net::InetAddress(), &callbacks,
                                   net::TriggerMode::kLevel);
  }
  ~Fixture() { loop.connections().close_all(&callbacks); }

  net::EventLoop loop;
  net::ConnectionCallbacks callbacks;
  net::Socket peer;
  net::TcpConnection* conn = nullptr;
};

void BM_ResponseHeadFor1KiBFile(benchmark::State& state) {
  Fixture f;
  const std::string body(1024, 'x');
  http::Http1Output http1;
  http::ResponseWriter::Context ctx;
  ctx.stream = &http1;
  ctx.date = "Sun, 22 Nov 2026 12:00:00 GMT";
  ctx.server = "tern";
  size_t bytes = 0;
  for (auto _ : state) {
    http1.begin(f.conn, http::Version::kHttp11);
    http::ResponseWriter w(ctx);
    w.start(200)
        .header("Content-Type", "text/html; charset=utf-8")
        .header("Last-Modified", "Sun, 22 Nov 2026 11:00:00 GMT")
        .header("ETag", "\"6b02d00e-400\"")
        .header("Accept-Ranges", "bytes")
        .body(body);
    net::Buffer& out = f.conn->output_tail_buffer();
    bytes += out.readable_bytes();
    benchmark::DoNotOptimize(out.peek());
    out.retrieve_all();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_ResponseHeadFor1KiBFile);

void BM_NotModifiedHead(benchmark::State& state) {
  Fixture f;
  http::Http1Output http1;
  http::ResponseWriter::Context ctx;
  ctx.stream = &http1;
  ctx.date = "Sun, 22 Nov 2026 12:00:00 GMT";
  ctx.server = "tern";
  for (auto _ : state) {
    http1.begin(f.conn, http::Version::kHttp11);
    http::ResponseWriter w(ctx);
    w.start(304).header("ETag", "\"6b02d00e-400\"").end();
    net::Buffer& out = f.conn->output_tail_buffer();
    benchmark::DoNotOptimize(out.peek());
    out.retrieve_all();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_NotModifiedHead);

}  // namespace
