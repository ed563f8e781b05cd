#include "http/request_parser.h"

#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace tern::http {
namespace {

using namespace std::string_literals;
using Limits = RequestParser::Limits;

// A deep copy of everything a Request exposes, so that results parsed from
// different buffers can be compared after those buffers are gone.
struct Parsed {
  Method method = Method::kOther;
  std::string method_text, target, path, query, host;
  Version version = Version::kHttp11;
  std::vector<std::pair<std::string, std::string>> headers;
  bool keep_alive = false;
  BodyFraming framing = BodyFraming::kNone;
  uint64_t content_length = 0;
  bool expect_continue = false;
  size_t head_size = 0;
  bool operator==(const Parsed&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Parsed& p) {
  os << "{" << p.method_text << " " << p.target << " path=" << p.path << " query=" << p.query
     << " v1." << (p.version == Version::kHttp11 ? 1 : 0) << " host=" << p.host
     << " keep_alive=" << p.keep_alive << " framing=" << static_cast<int>(p.framing)
     << " length=" << p.content_length << " expect=" << p.expect_continue
     << " head_size=" << p.head_size << " fields:";
  for (const auto& [name, value] : p.headers) os << " [" << name << ": " << value << "]";
  return os << "}";
}

Parsed snapshot(const Request& r) {
  Parsed p{r.method(),       std::string(r.method_text()), std::string(r.target()),
           std::string(r.path()), std::string(r.query()),  std::string(r.host()),
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
std::string show(std::string_view bytes) {
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
testing::AssertionResult parses(std::string_view input, Parsed* out, Limits limits = {}) {
  Feeder whole(limits);
  if (ParseStatus s = whole.feed(input); s != ParseStatus::kComplete) {
    return testing::AssertionFailure() << "whole input: status " << static_cast<int>(s) << ", "
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
      return testing::AssertionFailure()
             << "split at " << cut << ": " << static_cast<int>(first) << "/"
             << static_cast<int>(second) << " " << f.why() << "\n got " << snapshot(f.request)
             << "\nwant " << *out;
    }
  }
  Feeder bytes(limits);
  for (size_t n = 1; n <= head; ++n) {
    ParseStatus s = bytes.feed(input.substr(0, n));
    if (s != (n < head ? ParseStatus::kNeedMore : ParseStatus::kComplete)) {
      return testing::AssertionFailure() << "byte by byte, at " << n << ": " << bytes.why();
    }
  }
  if (snapshot(bytes.request) != *out) {
    return testing::AssertionFailure() << "byte by byte:\n got " << snapshot(bytes.request)
                                       << "\nwant " << *out;
  }
  return testing::AssertionSuccess();
}

// An invalid request must fail with `status` fed whole, split at every offset
// and byte by byte; a partial input may fail early or ask for more, but never
// completes.
testing::AssertionResult fails_with(std::string_view input, int status, Limits limits = {}) {
  auto check = [&](Feeder& f, ParseStatus s, const std::string& how) {
    if (s == ParseStatus::kError && f.parser.error_status() == status &&
        !f.parser.error_reason().empty()) {
      return testing::AssertionSuccess();
    }
    return testing::AssertionFailure() << how << ": status " << static_cast<int>(s) << ", "
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
std::string get_with(std::string_view fields) {
  return "GET / HTTP/1.1\r\nHost: example.com\r\n" + std::string(fields) + "\r\n";
}

const std::string kSimpleGet = "GET /index.html HTTP/1.1\r\nHost: example.com\r\n\r\n";

TEST(RequestParserHelpers, CatchWrongExpectations) {
  Parsed p;
  EXPECT_FALSE(fails_with(kSimpleGet, 400));
  EXPECT_FALSE(fails_with("GET / HTTP/2.0\r\n\r\n", 400));
  EXPECT_FALSE(parses("GET / HTTP/1.1\r\n\r\n", &p));
  EXPECT_FALSE(parses("GET / HTTP/1.1\r\nHost: a\r\n", &p));
}

TEST(RequestParser, ParsesSimpleGet) {
  Parsed p;
  ASSERT_TRUE(parses(kSimpleGet, &p));
  EXPECT_EQ(p.method, Method::kGet);
  EXPECT_EQ(p.method_text, "GET");
  EXPECT_EQ(p.target, "/index.html");
  EXPECT_EQ(p.path, "/index.html");
  EXPECT_EQ(p.query, "");
  EXPECT_EQ(p.version, Version::kHttp11);
  EXPECT_EQ(p.host, "example.com");
  EXPECT_TRUE(p.keep_alive);
  EXPECT_EQ(p.framing, BodyFraming::kNone);
  EXPECT_FALSE(p.expect_continue);
  EXPECT_EQ(p.head_size, kSimpleGet.size());
  ASSERT_EQ(p.headers.size(), 1u);
  EXPECT_EQ(p.headers[0], std::pair("Host"s, "example.com"s));
}

TEST(RequestParser, MapsEveryKnownMethod) {
  const std::pair<std::string, Method> methods[] = {
      {"GET", Method::kGet},         {"HEAD", Method::kHead},       {"POST", Method::kPost},
      {"PUT", Method::kPut},         {"DELETE", Method::kDelete},   {"OPTIONS", Method::kOptions},
      {"PATCH", Method::kPatch},     {"TRACE", Method::kTrace},
  };
  for (const auto& [name, method] : methods) {
    Parsed p;
    ASSERT_TRUE(parses(name + " / HTTP/1.1\r\nHost: a\r\n\r\n", &p));
    EXPECT_EQ(p.method, method) << name;
    EXPECT_EQ(method_name(method), name);
  }
}

TEST(RequestParser, MethodsAreCaseSensitiveTokens) {
  Parsed p;
  ASSERT_TRUE(parses("get / HTTP/1.1\r\nHost: a\r\n\r\n", &p));
  EXPECT_EQ(p.method, Method::kOther);
  EXPECT_EQ(p.method_text, "get");
  ASSERT_TRUE(parses("M-SEARCH /x HTTP/1.1\r\nHost: a\r\n\r\n", &p));
  EXPECT_EQ(p.method, Method::kOther);
  EXPECT_EQ(p.method_text, "M-SEARCH");
}

TEST(RequestParser, RejectsMethodWithNonTokenBytes) {
  EXPECT_TRUE(fails_with("GE(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with(" GET / HTTP/1.1\r\nHost: a\r\n\r\n", 400));
}

// RFC 9112 9.3: 1.1 persists unless "close", 1.0 only with "keep-alive";
// Connection is a case-insensitive token list, possibly over several fields.
TEST(RequestParser, DecidesKeepAliveFromVersionAndConnection) {
  const std::pair<std::string, bool> cases[] = {
      {"GET / HTTP/1.0\r\n\r\n", false},
      {"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true},
      {"GET / HTTP/1.0\r\nConnection: keep-alive, Upgrade\r\n\r\n", true},
      {"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", false},
      {get_with(""), true},
      {get_with("Connection: close\r\n"), false},
      {get_with("Connection: closed\r\n"), true},
      {get_with("Connection: Upgrade,\tCLOSE\r\n"), false},
      {get_with("Connection: upgrade\r\nConnection: close\r\n"), false},
  };
  for (const auto& [input, keep_alive] : cases) {
    Parsed p;
    ASSERT_TRUE(parses(input, &p));
    EXPECT_EQ(p.keep_alive, keep_alive) << show(input);
  }
}

TEST(RequestParser, SplitsPathAndQuery) {
  Parsed p;
  ASSERT_TRUE(parses("GET /search?q=a%20b&x=?y HTTP/1.1\r\nHost: a\r\n\r\n", &p));
  EXPECT_EQ(p.path, "/search");
  EXPECT_EQ(p.query, "q=a%20b&x=?y");
  ASSERT_TRUE(parses("GET /p? HTTP/1.1\r\nHost: a\r\n\r\n", &p));
  EXPECT_EQ(p.path, "/p");
  EXPECT_EQ(p.query, "");
}

TEST(RequestParser, AcceptsAbsoluteForm) {
  Parsed p;
  ASSERT_TRUE(parses("GET http://example.com:8080/a/b?x=1 HTTP/1.1\r\nHost: h\r\n\r\n", &p));
  EXPECT_EQ(p.target, "http://example.com:8080/a/b?x=1");
  EXPECT_EQ(p.path, "/a/b");
  EXPECT_EQ(p.query, "x=1");
  ASSERT_TRUE(parses("GET http://example.com HTTP/1.1\r\nHost: h\r\n\r\n", &p));
  EXPECT_EQ(p.path, "/");
  ASSERT_TRUE(parses("GET HTTP://[::1]?q HTTP/1.1\r\nHost: h\r\n\r\n", &p));
  EXPECT_EQ(p.path, "/");
  EXPECT_EQ(p.query, "q");
}

TEST(RequestParser, RejectsMalformedAbsoluteForm) {
  EXPECT_TRUE(fails_with("GET index.html HTTP/1.1\r\nHost: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET http:/x HTTP/1.1\r\nHost: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET http://user@host/ HTTP/1.1\r\nHost: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET 1http://host/ HTTP/1.1\r\nHost: a\r\n\r\n", 400));
}

TEST(RequestParser, AsteriskFormOnlyForOptions) {
  Parsed p;
  ASSERT_TRUE(parses("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", &p));
  EXPECT_EQ(p.method, Method::kOptions);
  EXPECT_EQ(p.target, "*");
  EXPECT_TRUE(fails_with("GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400));
}

TEST(RequestParser, AuthorityFormOnlyForConnect) {
  Parsed p;
  ASSERT_TRUE(parses("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", &p));
  EXPECT_EQ(p.method, Method::kConnect);
  EXPECT_EQ(p.target, "example.com:443");
  EXPECT_TRUE(fails_with("CONNECT example.com HTTP/1.1\r\nHost: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET example.com:80 HTTP/1.1\r\nHost: a\r\n\r\n", 400));
}

TEST(RequestParser, RejectsTargetBytesOutsideVchar) {
  EXPECT_TRUE(fails_with("GET /a\x01 HTTP/1.1\r\nHost: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET /a\x7f HTTP/1.1\r\nHost: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET /a\0b HTTP/1.1\r\nHost: a\r\n\r\n"s, 400));
  EXPECT_TRUE(fails_with("GET /a\tb HTTP/1.1\r\nHost: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET /\r\nHost: a\r\n\r\n", 400));
}

TEST(RequestParser, RequiresSingleSpacesInRequestLine) {
  EXPECT_TRUE(fails_with("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET /  HTTP/1.1\r\nHost: a\r\n\r\n", 400));
}

TEST(RequestParser, RejectsMalformedVersionWith400) {
  for (const char* version : {"HTTP/1", "HTTP/1.10", "http/1.1", "HTTP/1.x", "HTTP/11", "HTTP/1.1 "}) {
    EXPECT_TRUE(fails_with("GET / "s + version + "\r\nHost: a\r\n\r\n", 400)) << version;
  }
}

TEST(RequestParser, RejectsUnsupportedVersionWith505) {
  for (const char* version : {"HTTP/2.0", "HTTP/1.2", "HTTP/3.0", "HTTP/0.9"}) {
    EXPECT_TRUE(fails_with("GET / "s + version + "\r\nHost: a\r\n\r\n", 505)) << version;
  }
}

TEST(RequestParser, LooksUpFieldsCaseInsensitively) {
  Feeder f(Limits{});
  ASSERT_EQ(f.feed(get_with("Content-Type: text/plain\r\nX-Dup: 1\r\nx-dup: 2\r\n")),
            ParseStatus::kComplete);
  const Request& r = f.request;
  EXPECT_EQ(r.header("content-type"), "text/plain");
  EXPECT_EQ(r.header("CONTENT-TYPE"), "text/plain");
  EXPECT_TRUE(r.has_header("cOnTeNt-TyPe"));
  EXPECT_EQ(r.header("X-DUP"), "1");
  EXPECT_EQ(r.header("Content-Typ"), "");
  EXPECT_FALSE(r.has_header("Accept"));
  EXPECT_TRUE(iequals("Keep-Alive", "kEEP-aLIVE"));
  EXPECT_FALSE(iequals("a", "b"));
  EXPECT_FALSE(iequals("[", "{"));  // differ only in bit 0x20, but not letters
}

TEST(RequestParser, StripsSpaceAndTabAroundValues) {
  Parsed p;
  ASSERT_TRUE(parses(get_with("X-A:\t \tvalue with  inner\tspace \t \r\nX-B:v\r\n"), &p));
  ASSERT_EQ(p.headers.size(), 3u);
  EXPECT_EQ(p.headers[1].second, "value with  inner\tspace");
  EXPECT_EQ(p.headers[2].second, "v");
}

TEST(RequestParser, AcceptsEmptyValues) {
  Parsed p;
  ASSERT_TRUE(parses(get_with("X-Empty:\r\nX-Blank:  \t\r\n"), &p));
  ASSERT_EQ(p.headers.size(), 3u);
  EXPECT_EQ(p.headers[1], std::pair("X-Empty"s, ""s));
  EXPECT_EQ(p.headers[2], std::pair("X-Blank"s, ""s));
}

TEST(RequestParser, AcceptsObsTextInValues) {
  std::string high;
  for (int c = 0x80; c <= 0xff; ++c) high += static_cast<char>(c);
  Parsed p;
  ASSERT_TRUE(parses(get_with("X-Name: caf\xc3\xa9\r\nX-High: " + high + "\r\n"), &p));
  EXPECT_EQ(p.headers[1].second, "caf\xc3\xa9");
  EXPECT_EQ(p.headers[2].second, high);
}

// The scanners test 16 bytes at a time and finish byte by byte, so a bad
// byte must be caught wherever it falls relative to those blocks.
TEST(RequestParser, CatchesBadBytesAtEveryPosition) {
  for (size_t at = 0; at < 40; ++at) {
    std::string value(40, 'v'), target(40, 't'), name(40, 'n');
    value[at] = '\x01';
    target[at] = '\x80';
    name[at] = '(';
    EXPECT_TRUE(fails_with(get_with("X: " + value + "\r\n"), 400)) << at;
    EXPECT_TRUE(fails_with("GET /" + target + " HTTP/1.1\r\nHost: a\r\n\r\n", 400)) << at;
    EXPECT_TRUE(fails_with(get_with(name + ": v\r\n"), 400)) << at;
  }
}

TEST(RequestParser, AcceptsEveryTcharInNamesAndMethods) {
  const std::string tchars =
      "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  Parsed p;
  ASSERT_TRUE(parses(get_with(tchars + ":v\r\n"), &p));
  EXPECT_EQ(p.headers[1].first, tchars);
  ASSERT_TRUE(parses(tchars + " / HTTP/1.1\r\nHost: a\r\n\r\n", &p));
  EXPECT_EQ(p.method_text, tchars);
}

TEST(RequestParser, SkipsLeadingEmptyLines) {
  const std::string input = "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
  Parsed p;
  ASSERT_TRUE(parses(input, &p));
  EXPECT_EQ(p.method_text, "GET");
  EXPECT_EQ(p.head_size, input.size());  // the skipped lines are consumed too
  EXPECT_TRUE(fails_with("\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("\r\rGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400));
}

TEST(RequestParser, StopsAtEndOfHeadWithPipelinedRequest) {
  const std::string first = "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n";
  const std::string second = "POST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n";
  Parsed p;
  ASSERT_TRUE(parses(first + second, &p));
  EXPECT_EQ(p.head_size, first.size());
  EXPECT_EQ(p.target, "/1");

  RequestParser parser;
  Request request;
  std::string both = first + second;
  ASSERT_EQ(parser.parse(both, &request), ParseStatus::kComplete);
  parser.reset();
  std::string_view rest = std::string_view(both).substr(request.head_size());
  ASSERT_EQ(parser.parse(rest, &request), ParseStatus::kComplete);
  EXPECT_EQ(request.target(), "/2");
  EXPECT_EQ(request.head_size(), second.size());
}

TEST(RequestParser, ResumesWhenTheBufferMoves) {
  RequestParser parser;
  Request request;
  std::string part = kSimpleGet.substr(0, 20);
  ASSERT_EQ(parser.parse(part, &request), ParseStatus::kNeedMore);
  part.assign(part.size(), 'X');  // the old bytes are gone
  std::string moved = "padding" + kSimpleGet;
  std::string_view view = std::string_view(moved).substr(7);
  ASSERT_EQ(parser.parse(view, &request), ParseStatus::kComplete);
  EXPECT_EQ(request.target(), "/index.html");
  EXPECT_EQ(request.target().data(), view.data() + 4);
  EXPECT_EQ(request.host(), "example.com");
}

TEST(RequestParser, ErrorsAreStickyUntilReset) {
  RequestParser parser;
  Request request;
  ASSERT_EQ(parser.parse("GET / HTTP/1.1\n", &request), ParseStatus::kError);
  EXPECT_EQ(parser.parse(kSimpleGet, &request), ParseStatus::kError);
  parser.reset();
  EXPECT_EQ(parser.parse(kSimpleGet, &request), ParseStatus::kComplete);
  EXPECT_EQ(parser.error_status(), 0);
}

TEST(RequestParser, RejectsBareLfAndBareCr) {
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\nHost: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\nHost: a\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\nHost: a\r\n\n", 400));
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\nHost: a\r\nX: b\rc\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\nHost: a\r\n\rX", 400));
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\rX", 400));
}

TEST(RequestParser, RejectsSpaceBeforeColon) {
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\nHost\t: a\r\n\r\n", 400));
}

TEST(RequestParser, RejectsMalformedFieldNames) {
  EXPECT_TRUE(fails_with(get_with("Ho\0st: a\r\n"s), 400));
  EXPECT_TRUE(fails_with(get_with(": a\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("X(y): a\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("NoColon\r\n"), 400));
}

TEST(RequestParser, RejectsControlBytesInValues) {
  EXPECT_TRUE(fails_with(get_with("X: a\0b\r\n"s), 400));
  EXPECT_TRUE(fails_with(get_with("X: a\x01" "b\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("X: a\x7f\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("X: 0123456789abcdef\x1b" "0123456789\r\n"), 400));
}

TEST(RequestParser, RejectsObsFold) {
  EXPECT_TRUE(fails_with(get_with("X: a\r\n b\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("X: a\r\n\tb\r\n"), 400));
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\n Host: a\r\n\r\n", 400));
}

TEST(RequestParser, RequiresExactlyOneHostIn11) {
  Parsed p;
  EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\nX: a\r\n\r\n", 400));
  EXPECT_TRUE(fails_with(get_with("Host: other\r\n"), 400));
  EXPECT_TRUE(fails_with("GET / HTTP/1.0\r\nHost: a\r\nhost: a\r\n\r\n", 400));
  ASSERT_TRUE(parses("GET / HTTP/1.1\r\nHost:\r\n\r\n", &p));  // RFC 9110 7.2
  EXPECT_EQ(p.host, "");
}

TEST(RequestParser, ChecksHostSyntax) {
  Parsed p;
  for (const char* good : {"example.com:8080", "[::1]:80", "[2001:db8::1]", "10.0.0.1", "a%41b"}) {
    EXPECT_TRUE(parses("GET / HTTP/1.1\r\nHost: "s + good + "\r\n\r\n", &p)) << good;
  }
  for (const char* bad : {"a b", "a/b", "a@b", "[::1", "[]", "a:8x", ":80", "a:80:80", "%4"}) {
    EXPECT_TRUE(fails_with("GET / HTTP/1.1\r\nHost: "s + bad + "\r\n\r\n", 400)) << bad;
  }
}

TEST(RequestParser, ParsesContentLength) {
  Parsed p;
  ASSERT_TRUE(parses(get_with("Content-Length: 42\r\n"), &p));
  EXPECT_EQ(p.framing, BodyFraming::kContentLength);
  EXPECT_EQ(p.content_length, 42u);
  ASSERT_TRUE(parses(get_with("Content-Length: 0\r\n"), &p));
  EXPECT_EQ(p.framing, BodyFraming::kContentLength);
  EXPECT_EQ(p.content_length, 0u);
  ASSERT_TRUE(parses(get_with("Content-Length: 18446744073709551615\r\n"), &p));
  EXPECT_EQ(p.content_length, 18446744073709551615u);
}

TEST(RequestParser, AcceptsRepeatedEqualContentLengths) {
  Parsed p;
  for (const char* fields : {"Content-Length: 5,5\r\n", "Content-Length: 5, 5\r\n",
                             "Content-Length:  5\r\n", "Content-Length: 5\r\ncontent-length: 5\r\n"}) {
    ASSERT_TRUE(parses(get_with(fields), &p)) << fields;
    EXPECT_EQ(p.content_length, 5u) << fields;
  }
}

TEST(RequestParser, RejectsMalformedContentLength) {
  for (const char* value : {"+5", "-1", "0x10", "5 5", "5, 6", "", "5,", ",5", "1e3", "５",
                            "18446744073709551616", "99999999999999999999999"}) {
    EXPECT_TRUE(fails_with(get_with("Content-Length: "s + value + "\r\n"), 400)) << value;
  }
  EXPECT_TRUE(fails_with(get_with("Content-Length: 5\r\nContent-Length: 6\r\n"), 400));
}

TEST(RequestParser, AcceptsChunkedTransferEncoding) {
  Parsed p;
  for (const char* fields : {"Transfer-Encoding: chunked\r\n", "transfer-encoding: Chunked\r\n",
                             "Transfer-Encoding: ,chunked\r\n"}) {
    ASSERT_TRUE(parses(get_with(fields), &p)) << fields;
    EXPECT_EQ(p.framing, BodyFraming::kChunked) << fields;
  }
}

TEST(RequestParser, RejectsContentLengthWithTransferEncoding) {
  EXPECT_TRUE(fails_with(get_with("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"), 400));
}

TEST(RequestParser, RejectsTransferEncodingNotEndingInChunked) {
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: chunked, gzip\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: identity\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: chunked, chunked\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: ,\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: chun ked\r\n"), 400));
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: chunked;x=1\r\n"), 400));
}

TEST(RequestParser, AnswersUnknownTransferCodingWith501) {
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: gzip, chunked\r\n"), 501));
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: identity, chunked\r\n"), 501));
  EXPECT_TRUE(fails_with(get_with("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"), 501));
}

TEST(RequestParser, RejectsTransferEncodingInHttp10) {
  EXPECT_TRUE(fails_with("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400));
}

TEST(RequestParser, NotesExpectContinueIn11Only) {
  Parsed p;
  ASSERT_TRUE(parses(get_with("Expect: 100-Continue\r\n"), &p));
  EXPECT_TRUE(p.expect_continue);
  ASSERT_TRUE(parses("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n", &p));
  EXPECT_FALSE(p.expect_continue);
}

TEST(RequestParser, EnforcesTargetLength) {
  Parsed p;
  const Limits limits{.max_target = 16};
  ASSERT_TRUE(parses("GET /" + std::string(15, 'a') + " HTTP/1.1\r\nHost: a\r\n\r\n", &p, limits));
  EXPECT_TRUE(fails_with("GET /" + std::string(16, 'a') + " HTTP/1.1\r\nHost: a\r\n\r\n", 414, limits));
  EXPECT_TRUE(fails_with("GET /" + std::string(16, 'a'), 414, limits));  // before it ends
  EXPECT_TRUE(fails_with("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n", 414));
}

TEST(RequestParser, EnforcesHeaderCount) {
  Parsed p;
  const Limits limits{.max_headers = 3};
  ASSERT_TRUE(parses(get_with("A: 1\r\nB: 2\r\n"), &p, limits));
  EXPECT_TRUE(fails_with(get_with("A: 1\r\nB: 2\r\nC: 3\r\n"), 431, limits));
  std::string many;
  for (int i = 0; i <= 100; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_TRUE(fails_with(get_with(many), 431));
}

TEST(RequestParser, EnforcesHeadSize) {
  Parsed p;
  const std::string input = get_with("X: " + std::string(40, 'v') + "\r\n");
  ASSERT_TRUE(parses(input, &p, Limits{.max_head_bytes = input.size()}));
  EXPECT_TRUE(fails_with(input, 431, Limits{.max_head_bytes = input.size() - 1}));
  EXPECT_TRUE(fails_with(get_with("X: " + std::string(20000, 'v') + "\r\n"), 431));
  std::string empty_lines;
  for (int i = 0; i < 9000; ++i) empty_lines += "\r\n";
  EXPECT_TRUE(fails_with(empty_lines, 431));  // skipped lines count too
  EXPECT_TRUE(fails_with(std::string(20000, 'G'), 431));
}

}  // namespace
}  // namespace tern::http
