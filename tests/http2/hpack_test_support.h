// What the HPACK tests share: hex strings as the RFC prints them, and
// decoded fields and table entries copied out as owned strings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http2/hpack_decoder.h"
#include "http2/hpack_table.h"

namespace tern::http2::testing {

using Pairs = std::vector<std::pair<std::string, std::string>>;

// "8286 8441" -> bytes; spaces and newlines are skipped.
inline std::string unhex(std::string_view hex) {
  auto digit = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  std::string out;
  int high = -1;
  for (char c : hex) {
    if (c == ' ' || c == '\n') continue;
    if (high < 0) {
      high = digit(c);
    } else {
      out.push_back(static_cast<char>(high * 16 + digit(c)));
      high = -1;
    }
  }
  return out;
}

inline std::string tohex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

struct Decoded {
  HpackError error = HpackError::kOk;
  Pairs fields;
  std::vector<HpackField> raw;  // views: valid during the sink call only, kept for flags
};

inline Decoded decode(HpackDecoder& decoder, std::string_view block) {
  Decoded d;
  d.error = decoder.decode(block, [&](const HpackField& f) {
    d.fields.emplace_back(std::string(f.name), std::string(f.value));
    d.raw.push_back({{}, {}, f.static_index, f.never_indexed, f.field_text});
  });
  return d;
}

// Newest first, as the RFC lists a table.
inline Pairs entries(const HpackDynamicTable& table) {
  Pairs out;
  for (size_t i = 0; i < table.count(); ++i) {
    const HpackEntry e = table.at(i);
    out.emplace_back(std::string(e.name), std::string(e.value));
  }
  return out;
}

}  // namespace tern::http2::testing
