// libFuzzer harness for the FastCGI client side: RecordParser, decode_pairs
// (with a ParamsWriter round trip) and CgiHeadParser.
//
// The first input byte picks a cut point; the rest is the data. Each parser
// must give the same outcome whole, in two pieces split at the cut, and one
// byte at a time, every piece in its own allocation (a parser that kept a
// view of an earlier piece reads freed memory and ASan stops it). For
// RecordParser that means the same events with STDOUT, STDERR and other
// content concatenated; the STDOUT it hands out also goes through a
// CgiHeadParser, piece by piece, as a FastCGI handler would do.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_support.h"
#include "fastcgi/cgi_response.h"
#include "fastcgi/protocol.h"
#include "net/buffer.h"

namespace {

using tern::fuzz::inside;
using tern::fastcgi::CgiHeadParser;
using tern::fastcgi::Event;
using tern::fastcgi::RecordParser;
using tern::fastcgi::RecordType;

// Pieces of `input` ending at each offset of `arrivals`.
std::vector<std::string_view> pieces(std::string_view input, const std::vector<size_t>& arrivals) {
  std::vector<std::string_view> out;
  size_t fed = 0;
  for (size_t arrived : arrivals) {
    out.push_back(input.substr(fed, arrived - fed));
    fed = arrived;
  }
  return out;
}

// ---- CgiHeadParser ---------------------------------------------------------

struct HeadOutcome {
  CgiHeadParser::Status status = CgiHeadParser::kNeedMore;
  size_t head_size = 0;
  std::string fields;  // status, reason, headers, content length, error
  bool operator==(const HeadOutcome&) const = default;
};

// Feeds one piece; returns true once the head is complete or failed.
bool feed_head(CgiHeadParser& parser, std::string_view piece, size_t max_fields, HeadOutcome* out) {
  if (out->status != CgiHeadParser::kNeedMore) return true;
  auto copy = std::make_unique<std::string>(piece);
  size_t used = 0;
  out->status = parser.feed(*copy, &used);
  FUZZ_CHECK(used <= copy->size());
  if (out->status == CgiHeadParser::kNeedMore) FUZZ_CHECK(used == copy->size());
  if (out->status == CgiHeadParser::kError) FUZZ_CHECK(used == 0 && !parser.error().empty());
  out->head_size += used;
  if (out->status == CgiHeadParser::kNeedMore) return false;
  if (out->status == CgiHeadParser::kError) {
    out->head_size = 0;
    out->fields = parser.error();
    return true;
  }
  int code = parser.status();
  FUZZ_CHECK(code >= 100 && code <= 999);
  FUZZ_CHECK(parser.headers().size() <= max_fields);
  std::string& s = out->fields;
  s = std::to_string(code) + ' ' + std::string(parser.reason()) + '\n';
  for (const auto& h : parser.headers()) {
    FUZZ_CHECK(!h.name.empty());
    FUZZ_CHECK(h.value.empty() || (h.value.front() != ' ' && h.value.back() != ' '));
    s.append(h.name).append(": ").append(h.value).push_back('\n');
  }
  if (auto length = parser.content_length()) s += "length " + std::to_string(*length);
  return true;
}

HeadOutcome parse_head(std::string_view input, const std::vector<size_t>& arrivals,
                       tern::http::ResponseParser::Limits limits) {
  const size_t max_head = limits.max_head_bytes;
  CgiHeadParser parser(limits);
  HeadOutcome out;
  for (std::string_view piece : pieces(input, arrivals)) {
    if (feed_head(parser, piece, limits.max_headers, &out)) break;
  }
  FUZZ_CHECK(out.head_size <= max_head);
  return out;
}

// ---- RecordParser ----------------------------------------------------------

struct RecordOutcome {
  std::string events;  // one line per event, content pieces merged
  std::string stdout_data;
  size_t consumed = 0;
  bool failed = false;
  HeadOutcome head;  // the CGI head at the start of STDOUT
  bool operator==(const RecordOutcome&) const = default;
};

// kNeedMore consumes all of the input, so each piece is parsed on its own,
// from a copy that is freed before the next piece arrives.
RecordOutcome parse_records(std::string_view input, const std::vector<size_t>& arrivals) {
  RecordParser parser;
  CgiHeadParser head_parser;
  RecordOutcome out;
  struct Tag {
    Event::Kind kind;
    uint16_t id;
    RecordType stream;
    bool operator==(const Tag&) const = default;
  };
  std::optional<Tag> last_piece;  // of the previous content piece, to merge
  for (std::string_view piece : pieces(input, arrivals)) {
    auto copy = std::make_unique<std::string>(piece);
    std::string_view rest = *copy;
    while (!out.failed) {
      size_t used = 0;
      Event e = parser.next(rest, &used);
      FUZZ_CHECK(used <= rest.size());
      out.consumed += used;
      if (e.kind == Event::kNeedMore) {
        FUZZ_CHECK(used == rest.size() && e.data.empty());
        break;
      }
      if (e.kind == Event::kError) {
        FUZZ_CHECK(!parser.error().empty());
        size_t again = 1;
        FUZZ_CHECK(parser.next(rest, &again).kind == Event::kError && again == 0);
        out.failed = true;
        out.events += "\nerror " + std::string(parser.error());
        break;
      }
      FUZZ_CHECK(inside(e.data, rest.substr(0, used)));
      const Tag tag{e.kind, e.request_id, e.stream};
      const bool content = e.kind == Event::kStdout || e.kind == Event::kStderr ||
                           (e.kind == Event::kOther && !e.data.empty());
      if (e.kind == Event::kStdout || e.kind == Event::kStderr) FUZZ_CHECK(!e.data.empty());
      if (!content || tag != last_piece) {
        out.events += '\n' + std::to_string(e.kind) + ' ' + std::to_string(e.request_id) + ' ' +
                      std::to_string(static_cast<int>(e.stream)) + ' ';
      }
      if (content) {
        out.events.append(e.data);
        last_piece = tag;
      } else {
        FUZZ_CHECK(parser.at_record_boundary());
        out.events += std::to_string(e.app_status) + ' ' +
                      std::to_string(static_cast<int>(e.protocol_status));
        last_piece.reset();
      }
      if (e.kind == Event::kStdout) {
        out.stdout_data.append(e.data);
        feed_head(head_parser, e.data, tern::http::ResponseParser::Limits{}.max_headers, &out.head);
      }
      rest.remove_prefix(used);
    }
  }
  return out;
}

// ---- Name-value pairs ------------------------------------------------------

using Pairs = std::vector<std::pair<std::string, std::string>>;

// The content of the PARAMS stream in `bytes`, read by hand; checks that the
// writer framed it as promised.
std::string params_content(std::string_view bytes) {
  std::string content;
  for (;;) {
    FUZZ_CHECK(bytes.size() >= tern::fastcgi::kHeaderSize);
    auto u = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
    FUZZ_CHECK(u(0) == 1 && u(1) == static_cast<uint8_t>(RecordType::kParams));
    FUZZ_CHECK(u(2) == 0x12 && u(3) == 0x34 && u(7) == 0);
    size_t length = static_cast<size_t>(u(4) << 8 | u(5));
    size_t padding = u(6);
    FUZZ_CHECK((length + padding) % 8 == 0 && padding < 8);
    FUZZ_CHECK(bytes.size() >= 8 + length + padding);
    content.append(bytes.substr(8, length));
    for (char c : bytes.substr(8 + length, padding)) FUZZ_CHECK(c == '\0');
    bytes.remove_prefix(8 + length + padding);
    if (length == 0) break;
  }
  FUZZ_CHECK(bytes.empty());
  return content;
}

void check_pairs(std::string_view input) {
  Pairs pairs;
  size_t total = 0;
  bool ok = tern::fastcgi::decode_pairs(input, [&](std::string_view n, std::string_view v) {
    FUZZ_CHECK(inside(n, input) && inside(v, input));
    total += n.size() + v.size();
    pairs.emplace_back(n, v);
  });
  FUZZ_CHECK(total + 2 * pairs.size() <= input.size());

  tern::net::Buffer out(16);  // small, so that the writer's appends grow it
  tern::fastcgi::ParamsWriter writer(out, 0x1234);
  for (const auto& [name, value] : pairs) writer.add(name, value);
  writer.finish();
  std::string content = params_content(out.view());
  Pairs again;
  FUZZ_CHECK(tern::fastcgi::decode_pairs(content, [&](std::string_view n, std::string_view v) {
    again.emplace_back(n, v);
  }));
  FUZZ_CHECK(again == pairs);
  if (ok) FUZZ_CHECK(content.size() <= input.size());  // the writer's lengths are minimal
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t n = input.size();
  const size_t cut = n * data[0] / 255;
  std::vector<size_t> bytes;
  for (size_t i = 1; i <= n; ++i) bytes.push_back(i);

  RecordOutcome whole = parse_records(input, {n});
  FUZZ_CHECK(whole == parse_records(input, {cut, n}));
  FUZZ_CHECK(whole == parse_records(input, bytes));
  FUZZ_CHECK(whole.consumed <= n);

  // A small head with few fields, and the defaults.
  for (const tern::http::ResponseParser::Limits limits :
       {tern::http::ResponseParser::Limits{.max_head_bytes = 64, .max_headers = 4}, tern::http::ResponseParser::Limits{}}) {
    HeadOutcome head = parse_head(input, {n}, limits);
    FUZZ_CHECK(head == parse_head(input, {cut, n}, limits));
    FUZZ_CHECK(head == parse_head(input, bytes, limits));
  }

  check_pairs(input);
  return 0;
}
