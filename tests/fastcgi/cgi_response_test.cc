#include "fastcgi/cgi_response.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tern::fastcgi {
namespace {

using namespace std::string_literals;
using Fields = std::vector<std::pair<std::string, std::string>>;

// Everything a caller can read from the parser, copied.
struct Outcome {
  CgiHeadParser::Status status = CgiHeadParser::kNeedMore;
  size_t head_size = 0;  // bytes of the input that belonged to the head
  int code = 0;
  std::string reason;
  Fields fields;
  std::optional<uint64_t> content_length;
  std::string error;
  bool operator==(const Outcome&) const = default;
};

void PrintTo(const Outcome& o, std::ostream* os) {
  *os << "{status " << static_cast<int>(o.status) << " head " << o.head_size << " code " << o.code
      << " reason \"" << o.reason << "\" fields " << testing::PrintToString(o.fields) << " length "
      << (o.content_length ? std::to_string(*o.content_length) : "none") << " error \""
      << o.error << "\"}";
}

// Feeds pieces ending at each offset of `arrivals`, each piece in its own
// string that is destroyed after the call (so the parser must copy).
constexpr size_t kDefaultMaxHead = http::ResponseParser::Limits{}.max_head_bytes;
constexpr size_t kDefaultMaxFields = http::ResponseParser::Limits{}.max_headers;

Outcome feed(std::string_view input, const std::vector<size_t>& arrivals, size_t max_head = kDefaultMaxHead,
             size_t max_fields = kDefaultMaxFields) {
  CgiHeadParser parser({max_head, max_fields});
  Outcome out;
  size_t fed = 0;
  for (size_t arrived : arrivals) {
    auto piece = std::make_unique<std::string>(input.substr(fed, arrived - fed));
    size_t used = 12345;
    out.status = parser.feed(*piece, &used);
    if (out.status == CgiHeadParser::kNeedMore && used != piece->size()) out.error = "short used";
    if (out.status == CgiHeadParser::kError && used != 0) out.error = "used on error";
    out.head_size = fed + used;
    fed = arrived;
    if (out.status != CgiHeadParser::kNeedMore) break;
  }
  if (out.status == CgiHeadParser::kError) {
    out.head_size = 0;
    out.error = parser.error();
  } else if (out.status == CgiHeadParser::kComplete) {
    out.code = parser.status();
    out.reason = parser.reason();
    for (const http::Header& h : parser.headers()) out.fields.emplace_back(h.name, h.value);
    out.content_length = parser.content_length();
    size_t used = 1;
    if (parser.feed("more", &used) != CgiHeadParser::kComplete || used != 0) out.error = "not done";
  }
  return out;
}

std::vector<std::vector<size_t>> deliveries(size_t size) {
  std::vector<std::vector<size_t>> all{{size}};
  for (size_t cut = 0; cut <= size; ++cut) all.push_back({cut, size});
  std::vector<size_t> bytes;
  for (size_t n = 1; n <= size; ++n) bytes.push_back(n);
  if (size > 2) all.push_back(bytes);
  return all;
}

// The input must give `want` whole, split at every offset, and byte by byte.
testing::AssertionResult gives(std::string_view input, const Outcome& want,
                               size_t max_head = kDefaultMaxHead) {
  for (const auto& arrivals : deliveries(input.size())) {
    Outcome got = feed(input, arrivals, max_head);
    if (got != want) {
      std::string how = arrivals.size() <= 2 ? "cut at " + std::to_string(arrivals.front())
                                             : "byte by byte";
      return testing::AssertionFailure() << how << ": got " << testing::PrintToString(got)
                                         << "\nwant " << testing::PrintToString(want);
    }
  }
  return testing::AssertionSuccess();
}

Outcome complete(size_t head_size, int code, std::string reason, Fields fields,
                 std::optional<uint64_t> content_length = std::nullopt) {
  return {CgiHeadParser::kComplete, head_size, code, std::move(reason), std::move(fields),
          content_length, ""};
}

Outcome error(std::string reason) {
  Outcome o;
  o.status = CgiHeadParser::kError;
  o.error = std::move(reason);
  return o;
}

Outcome need_more(size_t size) {
  Outcome o;
  o.head_size = size;
  return o;
}

const std::string kNoColon = "CGI response line without a colon";
const std::string kBadName = "invalid field name in CGI response";
const std::string kCtl = "control character in CGI response field";
const std::string kBadStatus = "invalid Status field in CGI response";
const std::string kBadLength = "invalid or conflicting Content-Length in CGI response";
const std::string kTooLarge = "CGI response head too large";

TEST(CgiHeadParserHelpers, CatchWrongExpectations) {
  const std::string input = "A: b\r\n\r\nbody";
  EXPECT_TRUE(gives(input, complete(8, 200, "", {{"A", "b"}})));
  EXPECT_FALSE(gives(input, complete(9, 200, "", {{"A", "b"}})));
  EXPECT_FALSE(gives(input, complete(8, 200, "", {{"A", "B"}})));
  EXPECT_FALSE(gives(input, complete(8, 404, "", {{"A", "b"}})));
}

TEST(CgiHeadParser, ParsesAPhpFpmHead) {
  const std::string head =
      "X-Powered-By: PHP/8.2.7\r\n"
      "Content-type: text/html; charset=UTF-8\r\n"
      "\r\n";
  EXPECT_TRUE(gives(head + "<html>",
                    complete(head.size(), 200, "",
                             {{"X-Powered-By", "PHP/8.2.7"},
                              {"Content-type", "text/html; charset=UTF-8"}})));
}

TEST(CgiHeadParser, TakesStatusAndReasonFromTheStatusField) {
  EXPECT_TRUE(gives("Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\n",
                    complete(51, 404, "Not Found", {{"Content-Type", "text/plain"}})));
  EXPECT_TRUE(gives("status:204\n\n", complete(12, 204, "", {})));
  EXPECT_TRUE(gives("Status: 100\r\n\r\n", complete(15, 100, "", {})));
  EXPECT_TRUE(
      gives("Status: 999  Odd \t reason  \r\n\r\n", complete(31, 999, "Odd \t reason", {})));
  EXPECT_TRUE(gives("Status: 418\tI'm a teapot\r\n\r\n", complete(28, 418, "I'm a teapot", {})));
}

TEST(CgiHeadParser, AnswersLocationWith302) {
  EXPECT_TRUE(gives("Location: http://example.com/x\r\n\r\n",
                    complete(34, 302, "", {{"Location", "http://example.com/x"}})));
  // A local redirect is answered as a client redirect too.
  EXPECT_TRUE(gives("Location: /elsewhere\r\n\r\n",
                    complete(24, 302, "", {{"Location", "/elsewhere"}})));
  // Status wins, wherever it is.
  EXPECT_TRUE(gives("Location: /x\r\nStatus: 301 Moved Permanently\r\n\r\n",
                    complete(47, 301, "Moved Permanently", {{"Location", "/x"}})));
  EXPECT_TRUE(gives("Status: 201\r\nLocation: /new\r\n\r\n",
                    complete(31, 201, "", {{"Location", "/new"}})));
  // An empty Location is no redirect.
  EXPECT_TRUE(gives("Location:\r\n\r\n", complete(13, 200, "", {{"Location", ""}})));
}

TEST(CgiHeadParser, AcceptsBareLfAndMixedLineEnds) {
  EXPECT_TRUE(gives("A: 1\nB: 2\r\nC: 3\n\r\nrest",
                    complete(18, 200, "", {{"A", "1"}, {"B", "2"}, {"C", "3"}})));
  EXPECT_TRUE(gives("A: 1\r\n\nrest", complete(7, 200, "", {{"A", "1"}})));
}

TEST(CgiHeadParser, TrimsNamesAndValues) {
  EXPECT_TRUE(gives("Name \t:  \t value  with  inner \t \r\nEmpty:\r\nSpaces:   \r\n\r\n",
                    complete(56, 200, "",
                             {{"Name", "value  with  inner"}, {"Empty", ""}, {"Spaces", ""}})));
}

TEST(CgiHeadParser, KeepsBinaryAndColonsInValues) {
  EXPECT_TRUE(gives("Set-Cookie: a=b; path=/: x\xff\x80\r\n\r\n",
                    complete(32, 200, "", {{"Set-Cookie", "a=b; path=/: x\xff\x80"}})));
}

TEST(CgiHeadParser, CompletesOnAnEmptyHead) {
  EXPECT_TRUE(gives("\r\nbody", complete(2, 200, "", {})));
  EXPECT_TRUE(gives("\nbody", complete(1, 200, "", {})));
}

TEST(CgiHeadParser, NeedsMoreUntilTheEmptyLine) {
  EXPECT_TRUE(gives("", need_more(0)));
  EXPECT_TRUE(gives("Status: 200\r\n", need_more(13)));
  EXPECT_TRUE(gives("Status: 200\r\n\r", need_more(14)));
  EXPECT_TRUE(gives("A: b", need_more(4)));
}

TEST(CgiHeadParser, LooksUpFieldsCaseInsensitively) {
  CgiHeadParser parser;
  size_t used = 0;
  ASSERT_EQ(parser.feed("Content-Type: text/html\r\nX-A: 1\r\nx-a: 2\r\n\r\n", &used),
            CgiHeadParser::kComplete);
  EXPECT_EQ(parser.header("content-type"), "text/html");
  EXPECT_EQ(parser.header("CONTENT-TYPE"), "text/html");
  EXPECT_EQ(parser.header("x-a"), "1");
  EXPECT_EQ(parser.header("Status"), "");
  EXPECT_EQ(parser.header("Content-Typ"), "");
}

TEST(CgiHeadParser, ReadsContentLength) {
  EXPECT_TRUE(gives("Content-Length: 42\r\n\r\n",
                    complete(22, 200, "", {{"Content-Length", "42"}}, 42)));
  EXPECT_TRUE(gives("Content-Length: 0\r\n\r\n",
                    complete(21, 200, "", {{"Content-Length", "0"}}, 0)));
  EXPECT_TRUE(gives("Content-Length: 18446744073709551615\r\n\r\n",
                    complete(40, 200, "", {{"Content-Length", "18446744073709551615"}},
                             18446744073709551615u)));
  EXPECT_TRUE(gives("content-length: 5\r\nContent-Length: 5\r\n\r\n",
                    complete(40, 200, "", {{"content-length", "5"}, {"Content-Length", "5"}}, 5)));
}

TEST(CgiHeadParser, RejectsInvalidContentLength) {
  for (std::string value : {"", "12a", "-1", "+1", "1 2", "1,1", "0x10", "18446744073709551616",
                            "99999999999999999999999"}) {
    EXPECT_TRUE(gives("Content-Length: " + value + "\r\n\r\n", error(kBadLength))) << value;
  }
  EXPECT_TRUE(gives("Content-Length: 5\r\nContent-Length: 6\r\n\r\n", error(kBadLength)));
}

TEST(CgiHeadParser, RejectsLinesWithoutAColon) {
  EXPECT_TRUE(gives("Hello world\r\n\r\n", error(kNoColon)));
  EXPECT_TRUE(gives("A: b\r\n<html>\r\n\r\n", error(kNoColon)));
  EXPECT_TRUE(gives("\r \r\n\r\n", error(kNoColon)));
}

TEST(CgiHeadParser, RejectsInvalidFieldNames) {
  for (std::string line : {"Bad Name: x"s, "(x): y"s, "X\x01: y"s, "X\r: y"s, "\xff: y"s,
                           "X\"Y: z"s, "a/b: c"s, "a@b: c"s, "a\0b: c"s}) {
    EXPECT_TRUE(gives(line + "\r\n\r\n", error(kBadName))) << testing::PrintToString(line);
  }
  EXPECT_TRUE(gives(": y\r\n\r\n", error("empty field name in CGI response")));
  EXPECT_TRUE(gives(" \t: y\r\n\r\n", error("empty field name in CGI response")));
  // Leading whitespace (obs-fold) is never a name nor a continuation.
  EXPECT_TRUE(gives(" X: y\r\n\r\n", error(kBadName)));
  EXPECT_TRUE(gives("A: b\r\n\tX: y\r\n\r\n", error(kBadName)));
  // Token characters are all fine.
  EXPECT_TRUE(gives("!#$%&'*+-.^_`|~09az: v\r\n\r\n",
                    complete(26, 200, "", {{"!#$%&'*+-.^_`|~09az", "v"}})));
}

TEST(CgiHeadParser, RejectsControlCharactersInValues) {
  for (std::string value : {"a\x01" "b"s, "a\rb"s, "a\x7f"s, "\x1f"s, "a\0b"s, "x\r"s}) {
    EXPECT_TRUE(gives("X: " + value + "\r\n\r\n", error(kCtl))) << testing::PrintToString(value);
  }
  EXPECT_TRUE(gives("Status: 200 O\x01K\r\n\r\n", error(kCtl)));
  EXPECT_TRUE(gives("X: a\tb\r\n\r\n", complete(10, 200, "", {{"X", "a\tb"}})));
}

TEST(CgiHeadParser, RejectsInvalidStatus) {
  for (std::string value : {"", "99", "099", "1000", "abc", "20", "404Not Found", "4O4", "-100",
                            "2000 OK", "200.5"}) {
    EXPECT_TRUE(gives("Status: " + value + "\r\n\r\n", error(kBadStatus))) << value;
  }
  EXPECT_TRUE(gives("Status: 200\r\nStatus: 200\r\n\r\n",
                    error("more than one Status field in CGI response")));
}

TEST(CgiHeadParser, LimitsTheNumberOfFields) {
  std::string head;
  for (int i = 0; i < 99; ++i) head += "X-" + std::to_string(i) + ": v\r\n";
  Outcome ok = feed(head + "Status: 200\r\n\r\n", {head.size() + 15}, kDefaultMaxHead, 100);
  EXPECT_EQ(ok.status, CgiHeadParser::kComplete);
  EXPECT_EQ(ok.fields.size(), 99u);
  ok = feed(head + "X-last: v\r\n\r\n", {head.size() + 13}, kDefaultMaxHead, 100);
  EXPECT_EQ(ok.status, CgiHeadParser::kComplete);
  EXPECT_EQ(ok.fields.size(), 100u);
  EXPECT_EQ(ok.fields.back(), std::make_pair("X-last"s, "v"s));
  const std::string over = head + "Status: 200\r\nX-last: v\r\n\r\n";
  EXPECT_EQ(feed(over, {over.size()}, kDefaultMaxHead, 100), error("too many fields in CGI response head"));
  EXPECT_EQ(feed(over, {1000, over.size()}, kDefaultMaxHead, 100), error("too many fields in CGI response head"));
}

TEST(CgiHeadParser, TheDefaultBoundIsTheHeadsBytesNotAHundredFields) {
  // An application that sets many cookies: 300 fields, 5 KiB.
  std::string head;
  for (int i = 0; i < 300; ++i) head += "Set-Cookie: c" + std::to_string(i) + "=1\r\n";
  head += "\r\n";
  const Outcome ok = feed(head, {head.size()});
  EXPECT_EQ(ok.status, CgiHeadParser::kComplete);
  EXPECT_EQ(ok.fields.size(), 300u);
  EXPECT_EQ(feed(head, {7, 1000, head.size()}), ok);
}

TEST(CgiHeadParser, LimitsTheHeadSize) {
  // 16 + 2 = 18 bytes of head; the body after it does not count.
  const std::string input = "X-Long: 12345678\r\n\r\nbody bytes beyond the limit";
  EXPECT_TRUE(gives(input, complete(20, 200, "", {{"X-Long", "12345678"}}), 20));
  EXPECT_TRUE(gives(input, error(kTooLarge), 19));
  EXPECT_TRUE(gives("X-Long: 12345678", error(kTooLarge), 15));
  EXPECT_TRUE(gives("X-Long: 12345678", need_more(16), 16));
  // A default-sized parser takes 32 KiB and no more.
  const std::string big = "X: " + std::string(32 * 1024 - 7, 'v') + "\r\n\r\n";
  ASSERT_EQ(big.size(), 32u * 1024);
  EXPECT_EQ(feed(big, {big.size()}).status, CgiHeadParser::kComplete);
  EXPECT_EQ(feed(big, {1000, 20000, big.size()}).status, CgiHeadParser::kComplete);
  const std::string bigger = "X: " + std::string(32 * 1024 - 6, 'v') + "\r\n\r\n";
  EXPECT_EQ(feed(bigger, {bigger.size()}), error(kTooLarge));
  EXPECT_EQ(feed(bigger, {1000, 20000, bigger.size()}), error(kTooLarge));
}

TEST(CgiHeadParser, ReportsTheFirstErrorInLineOrder) {
  // A bad line before the size limit is crossed gives its own error.
  EXPECT_TRUE(gives("nocolon\r\nX: " + std::string(100, 'v') + "\r\n\r\n", error(kNoColon), 50));
  EXPECT_TRUE(gives("A: b\r\nX: " + std::string(100, 'v') + "\r\nnocolon\r\n\r\n",
                    error(kTooLarge), 50));
}

TEST(CgiHeadParser, StaysDoneUntilReset) {
  CgiHeadParser parser;
  size_t used = 0;
  ASSERT_EQ(parser.feed("Status: 404 Nope\r\nA: 1\r\n\r\nbody", &used), CgiHeadParser::kComplete);
  EXPECT_EQ(used, 26u);
  EXPECT_EQ(parser.feed("B: 2\r\n\r\n", &used), CgiHeadParser::kComplete);
  EXPECT_EQ(used, 0u);
  EXPECT_EQ(parser.headers().size(), 1u);
  EXPECT_EQ(parser.header("A"), "1");
  EXPECT_EQ(parser.reason(), "Nope");

  parser.reset();
  ASSERT_EQ(parser.feed("Location: /x\r\nContent-Length: 3\r\n\r\n", &used),
            CgiHeadParser::kComplete);
  EXPECT_EQ(parser.status(), 302);
  EXPECT_EQ(parser.reason(), "");
  EXPECT_EQ(parser.content_length(), 3u);
  ASSERT_EQ(parser.headers().size(), 2u);
  EXPECT_EQ(parser.header("A"), "");

  parser.reset();
  EXPECT_EQ(parser.feed("bad\r\n", &used), CgiHeadParser::kError);
  EXPECT_EQ(parser.feed("A: b\r\n\r\n", &used), CgiHeadParser::kError);
  EXPECT_EQ(used, 0u);
  parser.reset();
  EXPECT_EQ(parser.error(), "");
  ASSERT_EQ(parser.feed("A: b\r\n\r\n", &used), CgiHeadParser::kComplete);
  EXPECT_EQ(parser.status(), 200);
  EXPECT_EQ(parser.content_length(), std::nullopt);
}

TEST(CgiHeadParser, ViewsOutliveTheFedPieces) {
  CgiHeadParser parser;
  size_t used = 0;
  {
    std::string a = "Content-Type: te";
    ASSERT_EQ(parser.feed(a, &used), CgiHeadParser::kNeedMore);
    a.assign(a.size(), 'Z');
  }
  std::string b = "xt/plain\r\nStatus: 500 Boom\r\n\r\n";
  ASSERT_EQ(parser.feed(b, &used), CgiHeadParser::kComplete);
  b.assign(b.size(), 'Z');
  EXPECT_EQ(parser.header("Content-Type"), "text/plain");
  EXPECT_EQ(parser.reason(), "Boom");
}

}  // namespace
}  // namespace tern::fastcgi
