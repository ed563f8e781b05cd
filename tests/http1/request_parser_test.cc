#include "http1/request_parser.h"

#include <gtest/gtest.h>

#include <string>

#include "http1/request_parser_feeder.h"

namespace tern::http {
namespace {

using namespace test;  // NOLINT: the feeding helpers
using namespace std::string_literals;
using Limits = RequestParser::Limits;

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
  // RFC 9112 3.2.2: the target's authority is the request's host, and the
  // Host field is ignored; the URI is the target's origin-form.
  EXPECT_EQ(p.host, "example.com:8080");
  EXPECT_EQ(p.uri, "/a/b?x=1");
  ASSERT_TRUE(parses("GET http://example.com HTTP/1.1\r\nHost: h\r\n\r\n", &p));
  EXPECT_EQ(p.path, "/");
  EXPECT_EQ(p.uri, "/");
  EXPECT_EQ(p.host, "example.com");
  ASSERT_TRUE(parses("GET HTTP://[::1]?q HTTP/1.1\r\nHost: h\r\n\r\n", &p));
  EXPECT_EQ(p.path, "/");
  EXPECT_EQ(p.query, "q");
  EXPECT_EQ(p.uri, "/?q");
  EXPECT_EQ(p.host, "[::1]");
  // HTTP/1.0 without a Host field takes its host from the target too.
  ASSERT_TRUE(parses("GET http://a.example/x HTTP/1.0\r\n\r\n", &p));
  EXPECT_EQ(p.host, "a.example");
  EXPECT_EQ(p.uri, "/x");
  // An origin-form target is its own URI.
  ASSERT_TRUE(parses("GET /a%20b?c HTTP/1.1\r\nHost: h\r\n\r\n", &p));
  EXPECT_EQ(p.uri, "/a%20b?c");
  EXPECT_EQ(p.host, "h");
}

// The transport moves a parsed head out of its input buffer; the views
// follow it (Request::move_head), as parsing the copy again would make them.
TEST(RequestParser, AMovedHeadViewsItsCopy) {
  const std::string heads[] = {
      "GET /search?q=a%20b HTTP/1.1\r\nHost: example.com:8080\r\nAccept: */*\r\nX-Empty:\r\n\r\n",
      "GET /p HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET http://example.com HTTP/1.1\r\nHost: h\r\n\r\n",
      "GET HTTP://[::1]?q HTTP/1.1\r\nHost: h\r\n\r\n",
      "GET http://a.example/x/y?z HTTP/1.0\r\n\r\n",
      "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n",
      "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
      "\r\nPOST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n",
  };
  for (const std::string& head : heads) {
    std::string original = head;
    RequestParser parser;
    Request request;
    ASSERT_EQ(parser.parse(original, &request), ParseStatus::kComplete) << head;
    ASSERT_EQ(request.head_at(), original.data());
    const Parsed before = snapshot(request);
    const std::string copy = original;
    request.move_head(copy.data());
    original.assign(original.size(), 'x');  // the old bytes are gone
    EXPECT_EQ(snapshot(request), before) << head;
    EXPECT_EQ(request.head_at(), copy.data());
    auto in_copy = [&](std::string_view view) {
      return view.empty() || (view.data() >= copy.data() && view.data() + view.size() <= copy.data() + copy.size());
    };
    auto in_original = [&](std::string_view view) {
      return !view.empty() && view.data() >= original.data() && view.data() < original.data() + original.size();
    };
    for (std::string_view view : {request.method_text(), request.target(), request.path(), request.query(),
                                  request.host(), request.uri(), request.scheme()}) {
      EXPECT_FALSE(in_original(view)) << head << ": " << view;
    }
    EXPECT_TRUE(in_copy(request.method_text()) && in_copy(request.target()) && in_copy(request.host())) << head;
    for (const Header& field : request.headers()) {
      EXPECT_TRUE(in_copy(field.name) && in_copy(field.value)) << head << ": " << field.name;
    }
  }
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
  for (const char* version : {"HTTP/2.0", "HTTP/3.0", "HTTP/0.9", "HTTP/9.1"}) {
    EXPECT_TRUE(fails_with("GET / "s + version + "\r\nHost: a\r\n\r\n", 505)) << version;
  }
}

TEST(RequestParser, AnswersLaterMinorVersionsAsHttp11) {
  // RFC 9110 2.5: a server answers with the highest minor version it
  // supports of the major version received.
  for (const char* version : {"HTTP/1.2", "HTTP/1.9"}) {
    Parsed p;
    ASSERT_TRUE(parses("GET / "s + version + "\r\nHost: a\r\n\r\n", &p)) << version;
    EXPECT_EQ(p.version, Version::kHttp11) << version;
    EXPECT_TRUE(p.keep_alive) << version;
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

}  // namespace
}  // namespace tern::http
