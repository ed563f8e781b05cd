// libFuzzer harness for RequestParser (and ChunkedDecoder on chunked bodies).
//
// Beyond "no crash, no sanitizer report", it checks the property the parser
// promises: the outcome does not depend on how the bytes arrive. Each input
// is parsed whole and again in three growing prefixes whose cut points are
// derived from the data, every prefix in a fresh buffer (so a parser that
// kept a pointer instead of an offset reads freed memory and ASan stops it).
// The status, error status and every parsed field must agree.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "http1/chunked_decoder.h"
#include "http1/request_parser.h"

namespace {

using tern::fuzz::inside;
using tern::fuzz::mix;
using tern::http::BodyFraming;
using tern::http::ChunkedDecoder;
using tern::http::ParseStatus;
using tern::http::Request;
using tern::http::RequestParser;

struct Outcome {
  ParseStatus status = ParseStatus::kNeedMore;
  int error_status = 0;
  std::string fields;  // every accessor of the Request, serialized
  size_t head_size = 0;
  BodyFraming framing = BodyFraming::kNone;
  bool operator==(const Outcome&) const = default;
};

std::string serialize(const Request& r, std::string_view buffer) {
  std::string s;
  auto add = [&](std::string_view v) {
    FUZZ_CHECK(inside(v, buffer) || v == "/");  // "/" for an empty absolute path
    s.append(v);
    s.push_back('\0');
  };
  add(r.method_text());
  add(r.target());
  add(r.path());
  add(r.query());
  add(r.host());
  for (const auto& h : r.headers()) {
    add(h.name);
    add(h.value);
  }
  s += std::to_string(static_cast<int>(r.method())) + std::to_string(static_cast<int>(r.version())) +
       std::to_string(r.keep_alive()) + std::to_string(r.expect_continue()) + ' ' +
       std::to_string(r.content_length());
  return s;
}

// Small limits make 414 and 431 reachable with libFuzzer's short inputs.
constexpr RequestParser::Limits kSmallLimits{.max_target = 48, .max_head_bytes = 400, .max_headers = 6};

// Parses growing prefixes of input ending at each cut (the last is the whole).
Outcome parse_in_pieces(std::string_view input, std::initializer_list<size_t> cuts,
                        RequestParser::Limits limits) {
  RequestParser parser(limits);
  Request request;
  std::unique_ptr<std::string> buffer;
  Outcome out;
  for (size_t cut : cuts) {
    buffer = std::make_unique<std::string>(input.substr(0, cut));
    out.status = parser.parse(*buffer, &request);
    if (out.status != ParseStatus::kNeedMore) break;
  }
  if (out.status == ParseStatus::kError) {
    out.error_status = parser.error_status();
    FUZZ_CHECK(out.error_status == 400 || out.error_status == 414 || out.error_status == 431 ||
               out.error_status == 501 || out.error_status == 505);
  } else if (out.status == ParseStatus::kComplete) {
    out.fields = serialize(request, *buffer);
    out.head_size = request.head_size();
    out.framing = request.body_framing();
    FUZZ_CHECK(out.head_size <= buffer->size());
    FUZZ_CHECK(request.headers().size() <= limits.max_headers);
  }
  return out;
}

struct BodyOutcome {
  ChunkedDecoder::Status status = ChunkedDecoder::kNeedMore;
  std::string body;
  size_t consumed = 0;
  int error_status = 0;
  bool operator==(const BodyOutcome&) const = default;
};

// Decodes body bytes arriving in two pieces, erasing what is consumed.
BodyOutcome decode_in_pieces(std::string_view input, size_t cut) {
  ChunkedDecoder decoder;
  BodyOutcome out;
  std::string pending;
  for (std::string_view piece : {input.substr(0, cut), input.substr(cut)}) {
    pending.append(piece);
    for (;;) {
      size_t used = 0;
      std::string_view data;
      out.status = decoder.next(pending, &used, &data);
      FUZZ_CHECK(used <= pending.size());
      if (out.status == ChunkedDecoder::kData) {
        FUZZ_CHECK(!data.empty() && inside(data, std::string_view(pending).substr(0, used)));
        out.body.append(data);
      }
      out.consumed += used;
      pending.erase(0, used);
      if (out.status == ChunkedDecoder::kNeedMore) break;
      if (out.status != ChunkedDecoder::kData) {
        out.error_status = decoder.error_status();
        FUZZ_CHECK(out.status == ChunkedDecoder::kDone || out.error_status != 0);
        FUZZ_CHECK(decoder.body_bytes() == out.body.size());
        return out;
      }
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const uint64_t h = mix(input);
  const size_t cut1 = size == 0 ? 0 : h % (size + 1);
  const size_t cut2 = cut1 + (h >> 32) % (size - cut1 + 1);

  for (RequestParser::Limits limits : {kSmallLimits, RequestParser::Limits{}}) {
    Outcome whole = parse_in_pieces(input, {size}, limits);
    FUZZ_CHECK(whole == parse_in_pieces(input, {cut1, cut2, size}, limits));
    FUZZ_CHECK(whole == parse_in_pieces(input, {size / 3, size / 3 + 1, size}, limits));
  }
  Outcome whole = parse_in_pieces(input, {size}, RequestParser::Limits{});

  if (whole.status == ParseStatus::kComplete && whole.framing == BodyFraming::kChunked) {
    std::string_view body = input.substr(whole.head_size);
    BodyOutcome a = decode_in_pieces(body, body.size());
    BodyOutcome b = decode_in_pieces(body, body.empty() ? 0 : (h >> 16) % (body.size() + 1));
    FUZZ_CHECK(a == b);
    FUZZ_CHECK(a.consumed <= body.size());
  }
  return 0;
}
