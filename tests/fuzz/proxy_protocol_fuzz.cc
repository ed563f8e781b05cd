// libFuzzer harness for the PROXY protocol header parser. Its answer must
// not depend on how the bytes arrive: once a prefix is refused or read
// whole, every longer prefix gets the same answer, and nothing is waited
// for past kMaxProxyHeader bytes. A header it reads, written again, reads
// back to the same addresses.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "net/proxy_protocol.h"

using tern::net::ProxyParse;
using tern::net::ProxyParseResult;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const ProxyParseResult whole = tern::net::parse_proxy_header(input);
  if (whole.status == ProxyParse::kIncomplete) FUZZ_CHECK(input.size() < tern::net::kMaxProxyHeader);
  if (whole.status == ProxyParse::kDone) {
    FUZZ_CHECK(whole.size > 0 && whole.size <= input.size() && whole.size <= tern::net::kMaxProxyHeader);
    FUZZ_CHECK(whole.header.version == 1 || whole.header.version == 2);
  }
  // Cut where the data says, and byte by byte: the first answer that is
  // not "incomplete" is the whole's.
  const size_t cut = input.empty() ? 0 : tern::fuzz::mix(input) % (input.size() + 1);
  for (size_t n : {cut, size_t{0}}) {
    for (size_t end = n; end <= input.size(); ++end) {
      const ProxyParseResult r = tern::net::parse_proxy_header(input.substr(0, end));
      if (r.status == ProxyParse::kIncomplete) continue;
      FUZZ_CHECK(r.status == whole.status && r.size == whole.size);
      break;
    }
  }
  if (whole.status == ProxyParse::kDone && !whole.header.local) {
    const auto& h = whole.header;
    for (const std::string& again : {tern::net::proxy_header_v1(h.source, h.destination),
                                     tern::net::proxy_header_v2(h.source, h.destination)}) {
      const ProxyParseResult r = tern::net::parse_proxy_header(again);
      FUZZ_CHECK(r.status == ProxyParse::kDone && r.size == again.size());
      FUZZ_CHECK(r.header.source == h.source && r.header.destination == h.destination);
    }
  }
  return 0;
}
