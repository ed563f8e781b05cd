// libFuzzer harness for ResponseParser: no crash, no sanitizer report, and
// the answer does not depend on how the bytes arrive. Each input is parsed
// whole and again in growing prefixes whose cut points come from the data,
// each prefix in a fresh buffer (a parser that kept a pointer rather than an
// offset reads freed memory, and ASan stops it); status, reason, framing and
// every field must agree. The first byte picks a HEAD request or not.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "http1/response_parser.h"

namespace {

using tern::fuzz::inside;
using tern::fuzz::mix;
using tern::http::ParseStatus;
using tern::http::ResponseHead;
using tern::http::ResponseParser;

struct Outcome {
  ParseStatus status = ParseStatus::kNeedMore;
  std::string reason;
  std::string head;  // every parsed part, serialized
  bool operator==(const Outcome&) const = default;
};

std::string serialize(const ResponseHead& h, std::string_view buffer) {
  std::string s = std::to_string(h.status) + ' ' + std::to_string(static_cast<int>(h.version)) + ' ' +
                  std::to_string(static_cast<int>(h.body)) + ' ' + std::to_string(h.content_length) + ' ' +
                  std::to_string(h.keep_alive) + std::to_string(h.upgrade) + ' ' +
                  std::to_string(h.head_size) + '\0';
  FUZZ_CHECK(inside(h.reason, buffer));
  s.append(h.reason);
  for (const auto& f : h.headers) {
    FUZZ_CHECK(inside(f.name, buffer) && inside(f.value, buffer) && !f.name.empty());
    s.append(f.name).push_back('\0');
    s.append(f.value).push_back('\0');
  }
  return s;
}

constexpr ResponseParser::Limits kSmallLimits{.max_head_bytes = 300, .max_headers = 5};

Outcome parse_in_pieces(std::string_view input, bool head_request, std::initializer_list<size_t> cuts,
                        ResponseParser::Limits limits) {
  ResponseParser parser(limits);
  ResponseHead head;
  std::unique_ptr<std::string> buffer;
  Outcome out;
  for (size_t cut : cuts) {
    buffer = std::make_unique<std::string>(input.substr(0, cut));
    out.status = parser.parse(*buffer, head_request, &head);
    if (out.status != ParseStatus::kNeedMore) break;
  }
  if (out.status == ParseStatus::kError) {
    out.reason = std::string(parser.error_reason());
    FUZZ_CHECK(!out.reason.empty());
  } else if (out.status == ParseStatus::kComplete) {
    out.head = serialize(head, *buffer);
    FUZZ_CHECK(head.head_size <= buffer->size() && head.head_size <= limits.max_head_bytes);
    FUZZ_CHECK(head.headers.size() <= limits.max_headers);
    FUZZ_CHECK(head.status >= 100 && head.status <= 999);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool head_request = (data[0] & 1) != 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t n = input.size();
  const uint64_t h = mix(input);
  const size_t cut1 = h % (n + 1);
  const size_t cut2 = cut1 + (h >> 32) % (n - cut1 + 1);
  for (ResponseParser::Limits limits : {kSmallLimits, ResponseParser::Limits{}}) {
    const Outcome whole = parse_in_pieces(input, head_request, {n}, limits);
    FUZZ_CHECK(whole == parse_in_pieces(input, head_request, {cut1, cut2, n}, limits));
    FUZZ_CHECK(whole == parse_in_pieces(input, head_request, {n / 3, n / 3 + 1, n}, limits));
  }
  return 0;
}
