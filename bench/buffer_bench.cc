// Buffer hot paths: appending and consuming, integers in network order, line
// scanning, and reading from a socket through the 64 KiB spill area.
#include "net/buffer.h"

#include <benchmark/benchmark.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace {

using tern::net::Buffer;

// Appends one chunk and consumes it again: the steady state of a connection
// whose peer keeps up.
void BM_BufferAppendRetrieve(benchmark::State& state) {
  const std::string chunk(static_cast<size_t>(state.range(0)), 'x');
  Buffer b;
  for (auto _ : state) {
    b.append(chunk);
    benchmark::DoNotOptimize(b.peek());
    b.retrieve(chunk.size());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_BufferAppendRetrieve)->Arg(64)->Arg(4096);

// Appends 16 chunks, then consumes them in one go, so the buffer slides and
// (on the first pass) grows.
void BM_BufferAppendBatchRetrieveAll(benchmark::State& state) {
  const std::string chunk(static_cast<size_t>(state.range(0)), 'x');
  Buffer b;
  for (auto _ : state) {
    for (int i = 0; i < 16; ++i) b.append(chunk);
    benchmark::DoNotOptimize(b.peek());
    b.retrieve_all();
  }
  state.SetBytesProcessed(state.iterations() * 16 * state.range(0));
}
BENCHMARK(BM_BufferAppendBatchRetrieveAll)->Arg(64)->Arg(4096);

void BM_BufferAppendPeekU32(benchmark::State& state) {
  Buffer b;
  uint32_t v = 0;
  for (auto _ : state) {
    b.append_u32(v++);
    benchmark::DoNotOptimize(b.peek_u32());
    b.retrieve(sizeof(uint32_t));
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(sizeof(uint32_t)));
}
BENCHMARK(BM_BufferAppendPeekU32);

// Finds every line end of a ~500-byte browser-like request.
void BM_BufferFindCrlf(benchmark::State& state) {
  const std::string request =
      "GET /static/css/site.min.css?v=20240601 HTTP/1.1\r\n"
      "Host: www.example.com\r\n"
      "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:126.0) Gecko/20100101 Firefox/126.0\r\n"
      "Accept: text/css,*/*;q=0.1\r\n"
      "Accept-Language: en-US,en;q=0.5\r\n"
      "Accept-Encoding: gzip, deflate, br, zstd\r\n"
      "Referer: https://www.example.com/articles/2024/06/01/index.html\r\n"
      "Connection: keep-alive\r\n"
      "Cookie: session=7f3c2a9b1e4d6f8a0c2e4a6b8d0f1a3c; theme=dark; lang=en\r\n"
      "Sec-Fetch-Dest: style\r\n"
      "Sec-Fetch-Mode: no-cors\r\n"
      "Sec-Fetch-Site: same-origin\r\n"
      "If-Modified-Since: Sat, 01 Jun 2024 10:00:00 GMT\r\n"
      "\r\n";
  Buffer b;
  b.append(request);
  int lines = 0;
  for (auto _ : state) {
    lines = 0;
    for (const char* p = b.find_crlf(); p != nullptr; p = b.find_crlf(p + 2)) ++lines;
    benchmark::DoNotOptimize(lines);
  }
  if (lines != 14) state.SkipWithError("wrong number of lines");
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(request.size()));
  state.SetLabel(std::to_string(request.size()) + " bytes, 14 lines");
}
BENCHMARK(BM_BufferFindCrlf);

// Reads range(0) bytes from a socketpair per iteration; the write that
// supplies them is not timed.
void BM_BufferReadFd(benchmark::State& state) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    state.SkipWithError("socketpair failed");
    return;
  }
  const int sndbuf = 1 << 20;
  ::setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  const std::string data(static_cast<size_t>(state.range(0)), 'r');
  Buffer b;
  int err = 0;
  for (auto _ : state) {
    state.PauseTiming();
    if (::write(fds[1], data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
      state.SkipWithError("short write");
      break;
    }
    state.ResumeTiming();
    size_t got = 0;
    while (got < data.size()) {
      ssize_t n = b.read_fd(fds[0], &err);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    b.retrieve_all();
  }
  ::close(fds[0]);
  ::close(fds[1]);
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_BufferReadFd)->Arg(4096)->Arg(64 * 1024);

}  // namespace
