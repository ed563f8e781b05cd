// libFuzzer harness for ChunkedDecoder on its own, with small limits so that
// 413 and 431 are reachable. The body, the status and the bytes consumed
// must not depend on how the input arrives: whole, in two pieces cut where
// the data says, or one byte at a time.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "http1/chunked_decoder.h"

namespace {

using tern::http::ChunkedDecoder;

constexpr ChunkedDecoder::Limits kLimits{.max_body = 256, .max_line = 32, .max_trailer_bytes = 64};

struct Outcome {
  ChunkedDecoder::Status status = ChunkedDecoder::kNeedMore;
  std::string body;
  size_t consumed = 0;
  int error_status = 0;
  bool operator==(const Outcome&) const = default;
};

// Feeds pieces ending at each offset of `arrivals` into a pending buffer,
// erasing whatever the decoder consumes, as a connection would.
Outcome decode(std::string_view input, const std::vector<size_t>& arrivals) {
  ChunkedDecoder decoder(kLimits);
  Outcome out;
  std::string pending;
  size_t fed = 0;
  for (size_t arrived : arrivals) {
    pending.append(input.substr(fed, arrived - fed));
    fed = arrived;
    for (;;) {
      size_t used = 0;
      std::string_view data;
      out.status = decoder.next(pending, &used, &data);
      FUZZ_CHECK(used <= pending.size());
      if (out.status == ChunkedDecoder::kData) {
        FUZZ_CHECK(!data.empty() && data.data() >= pending.data() &&
                   data.data() + data.size() <= pending.data() + used);
        out.body.append(data);
      }
      out.consumed += used;
      pending.erase(0, used);
      if (out.status == ChunkedDecoder::kNeedMore) break;
      if (out.status == ChunkedDecoder::kData) continue;
      out.error_status = decoder.error_status();
      FUZZ_CHECK(out.status == ChunkedDecoder::kDone ||
                 out.error_status == 400 || out.error_status == 413 || out.error_status == 431);
      FUZZ_CHECK(decoder.body_bytes() == out.body.size());
      FUZZ_CHECK(out.body.size() <= kLimits.max_body);
      return out;
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t cut = 0;
  for (char c : input) cut = cut * 31 + static_cast<unsigned char>(c);
  cut = size == 0 ? 0 : cut % (size + 1);
  std::vector<size_t> bytes;
  for (size_t n = 1; n <= size; ++n) bytes.push_back(n);

  Outcome whole = decode(input, {size});
  FUZZ_CHECK(whole == decode(input, {cut, size}));
  FUZZ_CHECK(whole == decode(input, bytes));
  FUZZ_CHECK(whole.consumed <= size);
  return 0;
}
