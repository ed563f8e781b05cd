// RequestParser and ChunkedDecoder on realistic inputs. The target (issue 4)
// is at most 150 ns for the ~500-byte Chrome request on the release build.
//
//   chrome    a Chrome 119 navigation: GET with a query and 11 fields, 523 bytes
//   curl      curl's default GET, 78 bytes
//   two_reads the Chrome request arriving in two reads, split mid-field, so
//             the second parse() resumes from stored offsets
//   chunked   a 64 KiB body in 4 KiB chunks with an extension and a trailer
//
// Items are requests (or bodies); bytes are input bytes.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "http1/chunked_decoder.h"
#include "http1/request_parser.h"

namespace {

using tern::http::ChunkedDecoder;
using tern::http::ParseStatus;
using tern::http::Request;
using tern::http::RequestParser;

constexpr std::string_view kChromeGet =
    "GET /search?q=tern&lang=en HTTP/1.1\r\n"
    "Host: www.example.com\r\n"
    "Connection: keep-alive\r\n"
    "sec-ch-ua: \"Chromium\";v=\"119\", \"Not?A_Brand\";v=\"24\"\r\n"
    "sec-ch-ua-mobile: ?0\r\n"
    "sec-ch-ua-platform: \"Linux\"\r\n"
    "Upgrade-Insecure-Requests: 1\r\n"
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/119.0.0.0 Safari/537.36\r\n"
    "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,"
    "*/*;q=0.8\r\n"
    "Accept-Encoding: gzip, deflate, br\r\n"
    "Accept-Language: en-US,en;q=0.9\r\n"
    "Cookie: session=abc123\r\n"
    "\r\n";

constexpr std::string_view kCurlGet =
    "GET / HTTP/1.1\r\n"
    "Host: localhost:8080\r\n"
    "User-Agent: curl/7.88.1\r\n"
    "Accept: */*\r\n"
    "\r\n";

void parse_whole(benchmark::State& state, std::string_view input) {
  RequestParser parser;
  Request request;
  for (auto _ : state) {
    parser.reset();
    ParseStatus status = parser.parse(input, &request);
    benchmark::DoNotOptimize(status);
    benchmark::ClobberMemory();
  }
  if (parser.parse(input, &request) != ParseStatus::kComplete) state.SkipWithError("no parse");
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(input.size()));
}

void BM_ParseChromeGet(benchmark::State& state) { parse_whole(state, kChromeGet); }
BENCHMARK(BM_ParseChromeGet);

void BM_ParseCurlGet(benchmark::State& state) { parse_whole(state, kCurlGet); }
BENCHMARK(BM_ParseCurlGet);

void BM_ParseChromeGetInTwoReads(benchmark::State& state) {
  const std::string_view first = kChromeGet.substr(0, kChromeGet.size() / 2);
  RequestParser parser;
  Request request;
  for (auto _ : state) {
    parser.reset();
    ParseStatus a = parser.parse(first, &request);
    ParseStatus b = parser.parse(kChromeGet, &request);
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(b);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kChromeGet.size()));
}
BENCHMARK(BM_ParseChromeGetInTwoReads);

std::string chunked_body(size_t total, size_t chunk) {
  std::string body;
  for (size_t sent = 0; sent < total; sent += chunk) {
    char size_line[32];
    int n = std::snprintf(size_line, sizeof size_line, "%zx;n=1\r\n", chunk);
    body.append(size_line, static_cast<size_t>(n)).append(chunk, 'x').append("\r\n");
  }
  return body + "0\r\nX-Checksum: 1234\r\n\r\n";
}

void BM_DecodeChunked64K(benchmark::State& state) {
  const std::string input = chunked_body(64 * 1024, 4096);
  for (auto _ : state) {
    ChunkedDecoder decoder;
    std::string_view rest = input;
    size_t used = 0;
    std::string_view data;
    while (decoder.next(rest, &used, &data) == ChunkedDecoder::kData) {
      benchmark::DoNotOptimize(data);
      rest.remove_prefix(used);
    }
    benchmark::DoNotOptimize(decoder.body_bytes());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(input.size()));
}
BENCHMARK(BM_DecodeChunked64K);

}  // namespace
