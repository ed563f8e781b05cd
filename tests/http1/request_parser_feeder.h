// Test support for the request parser tests: feeds input whole, split at
// every offset and byte by byte (each call on a fresh copy, so the parser
// must cope with a moved buffer), and compares everything a Request exposes.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "http1/request_parser.h"

namespace tern::http::test {

using namespace std::string_literals;
using Limits = RequestParser::Limits;

// A deep copy of everything a Request exposes, so that results parsed from
// different buffers can be compared after those buffers are gone.
struct Parsed {
  Method method = Method::kOther;
  std::string method_text, target, path, query, host, uri;
  Version version = Version::kHttp11;
  std::vector<std::pair<std::string, std::string>> headers;
  bool keep_alive = false;
  BodyFraming framing = BodyFraming::kNone;
  uint64_t content_length = 0;
  bool expect_continue = false;
  size_t head_size = 0;
  bool operator==(const Parsed&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const Parsed& p) {
  os << "{" << p.method_text << " " << p.target << " path=" << p.path << " query=" << p.query << " uri=" << p.uri
     << " v1." << (p.version == Version::kHttp11 ? 1 : 0) << " host=" << p.host
     << " keep_alive=" << p.keep_alive << " framing=" << static_cast<int>(p.framing)
     << " length=" << p.content_length << " expect=" << p.expect_continue
     << " head_size=" << p.head_size << " fields:";
  for (const auto& [name, value] : p.headers) os << " [" << name << ": " << value << "]";
  return os << "}";
}

inline Parsed snapshot(const Request& r) {
  Parsed p{r.method(),       std::string(r.method_text()), std::string(r.target()),
           std::string(r.path()), std::string(r.query()),  std::string(r.host()),
           std::string(r.uri()),
           r.version(),      {},                           r.keep_alive(),
           r.body_framing(), r.content_length(),           r.expect_continue(),
           r.head_size()};
  for (const Header& h : r.headers()) p.headers.emplace_back(h.name, h.value);
  return p;
}

// One parser fed growing prefixes of an input. Each call gets a fresh copy of
// its prefix, and the previous copy is scribbled over and freed first, so a
// parser that kept a pointer instead of an offset reads garbage (or trips
// ASan) instead of passing by luck.
struct Feeder {
  explicit Feeder(Limits limits) : parser(limits) {}
  ParseStatus feed(std::string_view prefix) {
    if (buffer) buffer->assign(buffer->size(), '#');
    buffer = std::make_unique<std::string>(prefix);
    return parser.parse(*buffer, &request);
  }
  std::string why() const {
    return std::to_string(parser.error_status()) + " " + std::string(parser.error_reason());
  }
  RequestParser parser;
  Request request;
  std::unique_ptr<std::string> buffer;
};

// The input with CR, LF and other CTLs made visible, for failure messages.
inline std::string show(std::string_view bytes) {
  std::string out;
  for (char c : bytes) {
    if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) {
      out += c;
    } else {
      out += c == '\r' ? "\\r" : c == '\n' ? "\\n" : "\\x" + std::to_string(c);
    }
  }
  return out;
}

// A valid request must complete with the same result fed whole, split in two
// at every offset (the first part answers kNeedMore unless it already holds
// the whole head), and one byte at a time. *out receives that result.
inline ::testing::AssertionResult parses(std::string_view input, Parsed* out, Limits limits = {}) {
  Feeder whole(limits);
  if (ParseStatus s = whole.feed(input); s != ParseStatus::kComplete) {
    return ::testing::AssertionFailure() << "whole input: status " << static_cast<int>(s) << ", "
                                       << whole.why() << " for " << show(input);
  }
  *out = snapshot(whole.request);
  const size_t head = out->head_size;
  for (size_t cut = 1; cut < input.size(); ++cut) {
    Feeder f(limits);
    ParseStatus first = f.feed(input.substr(0, cut));
    ParseStatus want = cut < head ? ParseStatus::kNeedMore : ParseStatus::kComplete;
    ParseStatus second = first == ParseStatus::kNeedMore ? f.feed(input) : first;
    if (first != want || second != ParseStatus::kComplete || snapshot(f.request) != *out) {
      return ::testing::AssertionFailure()
             << "split at " << cut << ": " << static_cast<int>(first) << "/"
             << static_cast<int>(second) << " " << f.why() << "\n got " << snapshot(f.request)
             << "\nwant " << *out;
    }
  }
  Feeder bytes(limits);
  for (size_t n = 1; n <= head; ++n) {
    ParseStatus s = bytes.feed(input.substr(0, n));
    if (s != (n < head ? ParseStatus::kNeedMore : ParseStatus::kComplete)) {
      return ::testing::AssertionFailure() << "byte by byte, at " << n << ": " << bytes.why();
    }
  }
  if (snapshot(bytes.request) != *out) {
    return ::testing::AssertionFailure() << "byte by byte:\n got " << snapshot(bytes.request)
                                       << "\nwant " << *out;
  }
  return ::testing::AssertionSuccess();
}

// An invalid request must fail with `status` fed whole, split at every offset
// and byte by byte; a partial input may fail early or ask for more, but never
// completes.
inline ::testing::AssertionResult fails_with(std::string_view input, int status, Limits limits = {}) {
  auto check = [&](Feeder& f, ParseStatus s, const std::string& how) {
    if (s == ParseStatus::kError && f.parser.error_status() == status &&
        !f.parser.error_reason().empty()) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << how << ": status " << static_cast<int>(s) << ", "
                                       << f.why() << ", want " << status << " for " << show(input);
  };
  Feeder whole(limits);
  if (auto r = check(whole, whole.feed(input), "whole"); !r) return r;
  for (size_t cut = 1; cut < input.size(); ++cut) {
    Feeder f(limits);
    ParseStatus s = f.feed(input.substr(0, cut));
    if (s == ParseStatus::kNeedMore) s = f.feed(input);
    if (auto r = check(f, s, "split at " + std::to_string(cut)); !r) return r;
  }
  Feeder bytes(limits);
  ParseStatus s = ParseStatus::kNeedMore;
  for (size_t n = 1; n <= input.size() && s == ParseStatus::kNeedMore; ++n) {
    s = bytes.feed(input.substr(0, n));
  }
  return check(bytes, s, "byte by byte");
}

// Wraps fields in a minimal HTTP/1.1 request.
inline std::string get_with(std::string_view fields) {
  return "GET / HTTP/1.1\r\nHost: example.com\r\n" + std::string(fields) + "\r\n";
}

inline const std::string kSimpleGet = "GET /index.html HTTP/1.1\r\nHost: example.com\r\n\r\n";


}  // namespace tern::http::test
