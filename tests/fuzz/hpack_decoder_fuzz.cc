// libFuzzer harness for HpackDecoder: whatever the blocks, no crash and no
// sanitizer report; a decoder that failed stays failed; and the fields of
// every block that decodes, encoded again by HpackEncoder and decoded by a
// second decoder, come back the same, with the encoder's table and that
// decoder's in step.
//
// Input: one byte of settings (our table size limit, the second pair's
// table size, Huffman on or off), then blocks, each a length byte and that
// many bytes (255: the rest of the input). A length byte of 254 is instead
// a change of our advertised table size, to the size the next byte picks.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_support.h"
#include "http2/hpack_decoder.h"
#include "http2/hpack_encoder.h"

namespace {

using tern::http2::HpackDecoder;
using tern::http2::HpackEncoder;
using tern::http2::HpackError;
using tern::http2::HpackField;
using Fields = std::vector<std::pair<std::string, std::string>>;

constexpr uint32_t kSizes[8] = {0, 64, 256, 1024, 4096, 8192, 65536, 4096};

HpackError decode(HpackDecoder& decoder, std::string_view block, Fields& fields) {
  fields.clear();
  return decoder.decode(block, [&](const HpackField& f) { fields.emplace_back(f.name, f.value); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (in.empty()) return 0;
  const auto setup = static_cast<uint8_t>(in[0]);
  in.remove_prefix(1);
  const HpackDecoder::Settings settings{
      .table_size_limit = kSizes[setup & 7], .max_header_list_size = 8192, .max_string_length = 4096};
  HpackDecoder decoder(settings);
  HpackEncoder encoder({.max_table_size = kSizes[(setup >> 3) & 7], .huffman = (setup & 0x40) != 0});
  HpackDecoder check({.max_header_list_size = settings.max_header_list_size,
                      .max_string_length = settings.max_string_length});
  Fields fields, again;
  tern::net::Buffer out;
  while (!in.empty()) {
    const auto len = static_cast<uint8_t>(in[0]);
    in.remove_prefix(1);
    if (len == 254) {
      const uint32_t limit = in.empty() ? 0 : kSizes[static_cast<uint8_t>(in[0]) & 7];
      in.remove_prefix(in.empty() ? 0 : 1);
      decoder.set_table_size_limit(limit);
      encoder.set_peer_table_size(limit);
      check.set_table_size_limit(limit);
      continue;
    }
    const std::string_view block = in.substr(0, len == 255 ? in.size() : len);
    in.remove_prefix(block.size());

    const HpackError error = decode(decoder, block, fields);
    if (error != HpackError::kOk) {
      FUZZ_CHECK(decode(decoder, "\x82", again) == error);  // stays failed
      return 0;
    }
    FUZZ_CHECK(decoder.table().size() <= decoder.table().max_size());
    out.retrieve_all();
    for (const auto& [name, value] : fields) encoder.encode(name, value, out);
    FUZZ_CHECK(decode(check, out.view(), again) == HpackError::kOk);
    FUZZ_CHECK(again == fields);
    FUZZ_CHECK(check.table().size() == encoder.table().size());
    FUZZ_CHECK(check.table().count() == encoder.table().count());
  }
  return 0;
}
