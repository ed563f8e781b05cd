// The protocol-neutral request: field ids, and a head filled by a transport
// that decoded it itself (HTTP/2) judged as RequestParser judges HTTP/1.
#include "http/request.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "http1/request_parser_feeder.h"

namespace tern::http {
namespace {

TEST(FieldId, EveryKnownNameIsFoundInAnyCaseAndNothingElseIs) {
  for (size_t i = 1; i < static_cast<size_t>(FieldId::kCount); ++i) {
    const auto id = static_cast<FieldId>(i);
    std::string name(field_name(id));
    EXPECT_EQ(field_id(name), id) << name;
    for (char& c : name) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    EXPECT_EQ(field_id(name), id) << name;
    for (char& c : name) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
    EXPECT_EQ(field_id(name), id) << name;
    // One byte off, at each place, is another name.
    for (size_t at = 0; at < name.size(); ++at) {
      std::string other = name;
      other[at] = '#';
      EXPECT_EQ(field_id(other), FieldId::kOther) << other;
    }
    EXPECT_EQ(field_id(name + "s"), FieldId::kOther);
    EXPECT_EQ(field_id(name.substr(1)), FieldId::kOther);
  }
  // Names of the same shape as a known one.
  EXPECT_EQ(field_id("accept-language"), FieldId::kOther);
  EXPECT_EQ(field_id("if-match"), FieldId::kOther);
  EXPECT_EQ(field_id(""), FieldId::kOther);
  EXPECT_EQ(field_id("0"), FieldId::kOther);
  EXPECT_EQ(field_id(std::string(40, 'a')), FieldId::kOther);
  // Only letters fold: '-' matches only itself ('\r' | 0x20 == '-').
  EXPECT_EQ(field_id("content\rlength"), FieldId::kOther);
  EXPECT_EQ(field_id("content_length"), FieldId::kOther);
}

TEST(FieldId, TheHttp1ParserNamesEachField) {
  test::Feeder f(RequestParser::Limits{});
  ASSERT_EQ(f.feed("GET / HTTP/1.1\r\nhost: a\r\nX-Other: 1\r\nIF-NONE-MATCH: \"e\"\r\nCookie: a=1\r\n\r\n"),
            ParseStatus::kComplete);
  const Request& r = f.request;
  ASSERT_EQ(r.headers().size(), 4u);
  EXPECT_EQ(r.headers()[0].id, FieldId::kHost);
  EXPECT_EQ(r.headers()[1].id, FieldId::kOther);
  EXPECT_EQ(r.headers()[2].id, FieldId::kIfNoneMatch);
  EXPECT_EQ(r.header(FieldId::kIfNoneMatch), "\"e\"");
  EXPECT_EQ(r.header(FieldId::kCookie), "a=1");
  EXPECT_TRUE(r.has_header(FieldId::kHost));
  EXPECT_FALSE(r.has_header(FieldId::kRange));
  EXPECT_EQ(r.header(FieldId::kRange), "");
  EXPECT_EQ(r.scheme(), "");
}

TEST(Request, AnAbsoluteFormTargetNamesTheScheme) {
  test::Feeder f(RequestParser::Limits{});
  ASSERT_EQ(f.feed("GET https://a.example/x HTTP/1.1\r\nHost: b\r\n\r\n"), ParseStatus::kComplete);
  EXPECT_EQ(f.request.scheme(), "https");
  EXPECT_EQ(f.request.host(), "a.example");
  // The next request on the same object names none.
  f.parser.reset();
  ASSERT_EQ(f.feed("GET /x HTTP/1.1\r\nHost: b\r\n\r\n"), ParseStatus::kComplete);
  EXPECT_EQ(f.request.scheme(), "");
}

// Fields an access check vouches for replace the client's of those names
// (every one of them, present in the answer or not), and are the request's
// as any other field.
TEST(Request, ReplacedFieldsTakeOutTheClientsOfThoseNames) {
  test::Feeder f(RequestParser::Limits{});
  ASSERT_EQ(f.feed("GET / HTTP/1.1\r\nHost: a\r\nremote-user: mallory\r\nX-Keep: 1\r\nREMOTE-GROUPS: admins\r\n"
                   "Remote-User: eve\r\nCookie: c=1\r\n\r\n"),
            ParseStatus::kComplete);
  const Request& r = f.request;
  const std::vector<std::string> names{"Remote-User", "Remote-Groups"};
  std::string value = "alice";
  r.replace_fields(names, std::vector<Header>{{"Remote-User", value, FieldId::kOther}});
  value = "changed after";  // the request keeps its own copy
  std::vector<std::pair<std::string, std::string>> seen;
  for (const Header& h : r.headers()) seen.emplace_back(h.name, h.value);
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, std::string>>{
                      {"Host", "a"}, {"X-Keep", "1"}, {"Cookie", "c=1"}, {"Remote-User", "alice"}}));
  EXPECT_EQ(r.header(FieldId::kCookie), "c=1");
  EXPECT_EQ(r.header("remote-user"), "alice");
  EXPECT_FALSE(r.has_header("Remote-Groups"));
  // Twice: what the first added stays valid.
  r.replace_fields(std::vector<std::string>{"X-Keep"}, std::vector<Header>{{"X-Added", "2", FieldId::kOther}});
  EXPECT_EQ(r.header("Remote-User"), "alice");
  EXPECT_EQ(r.header("X-Added"), "2");
  EXPECT_FALSE(r.has_header("X-Keep"));
}

// What access checks found about one request (the check that let it
// through, the fields it added) is not the next one's on the same
// connection.
TEST(Request, ANewHeadForgetsWhatTheChecksOfTheLastOneFound) {
  test::Feeder f(RequestParser::Limits{});
  ASSERT_EQ(f.feed("GET /admin/ HTTP/1.1\r\nHost: a\r\n\r\n"), ParseStatus::kComplete);
  int check = 0, other = 0;
  f.request.grant(&check);
  f.request.grant(&other);
  EXPECT_TRUE(f.request.granted_by(&check) && f.request.granted_by(&other));
  f.request.replace_fields(std::vector<std::string>{"Remote-User"},
                           std::vector<Header>{{"Remote-User", "alice", FieldId::kOther}});
  f.parser.reset();
  ASSERT_EQ(f.feed("GET /public HTTP/1.1\r\nHost: a\r\n\r\n"), ParseStatus::kComplete);
  EXPECT_FALSE(f.request.granted_by(&check) || f.request.granted_by(&other));
  EXPECT_FALSE(f.request.has_header("Remote-User"));
}

// A decoded head, as HTTP/2 hands one over.
struct Decoded {
  std::string method = "GET", scheme = "https", authority = "a.example", path = "/p?q=1";
  std::vector<std::pair<std::string, std::string>> fields;
  bool unknown_length = false;
  size_t max_target = 8192, max_headers = 100;

  int fill(Request* request, std::string_view* reason) {
    headers.clear();
    for (const auto& [name, value] : fields) headers.push_back({name, value, field_id(name)});
    Request::DecodedHead head;
    head.method = method;
    head.scheme = scheme;
    head.authority = authority;
    head.path = path;
    head.fields = &headers;
    head.body_of_unknown_length = unknown_length;
    head.max_target = max_target;
    head.max_headers = max_headers;
    return request->set_head(Version::kHttp2, head, reason);
  }
  std::vector<Header> headers;
};

TEST(RequestSetHead, FillsWhatTheParserWould) {
  Decoded d;
  d.fields = {{"user-agent", "t"}, {"content-length", "5"}, {"cookie", "a=1; b=2"}};
  Request r;
  std::string_view reason;
  ASSERT_EQ(d.fill(&r, &reason), 0) << reason;
  EXPECT_EQ(r.method(), Method::kGet);
  EXPECT_EQ(r.method_text(), "GET");
  EXPECT_EQ(r.version(), Version::kHttp2);
  EXPECT_EQ(version_name(r.version()), "HTTP/2.0");
  EXPECT_EQ(r.scheme(), "https");
  EXPECT_EQ(r.host(), "a.example");
  EXPECT_EQ(r.target(), "/p?q=1");
  EXPECT_EQ(r.uri(), "/p?q=1");
  EXPECT_EQ(r.path(), "/p");
  EXPECT_EQ(r.query(), "q=1");
  EXPECT_FALSE(r.absolute_form());
  EXPECT_TRUE(r.keep_alive());
  EXPECT_EQ(r.body_framing(), BodyFraming::kContentLength);
  EXPECT_EQ(r.content_length(), 5u);
  EXPECT_EQ(r.header(FieldId::kUserAgent), "t");
  EXPECT_EQ(r.header("Cookie"), "a=1; b=2");
  EXPECT_EQ(r.headers().size(), 3u);
}

TEST(RequestSetHead, ABodyWithoutALengthIsReadToItsEnd) {
  Decoded d;
  d.method = "POST";
  d.unknown_length = true;
  Request r;
  std::string_view reason;
  ASSERT_EQ(d.fill(&r, &reason), 0) << reason;
  EXPECT_EQ(r.method(), Method::kPost);
  EXPECT_EQ(r.body_framing(), BodyFraming::kChunked);
  d.unknown_length = false;
  ASSERT_EQ(d.fill(&r, &reason), 0) << reason;
  EXPECT_EQ(r.body_framing(), BodyFraming::kNone);
}

TEST(RequestSetHead, AHostFieldStandsInForAMissingAuthorityAndMustAgreeWithOne) {
  Decoded d;
  d.authority = "";
  d.fields = {{"host", "h.example:8080"}};
  Request r;
  std::string_view reason;
  ASSERT_EQ(d.fill(&r, &reason), 0) << reason;
  EXPECT_EQ(r.host(), "h.example:8080");
  d.fields.clear();
  EXPECT_EQ(d.fill(&r, &reason), 400);
  EXPECT_EQ(reason, "missing Host");
  d.authority = "a.example";
  d.fields = {{"host", "A.Example"}};
  ASSERT_EQ(d.fill(&r, &reason), 0) << reason;
  EXPECT_EQ(r.host(), "a.example");
  d.fields = {{"host", "b.example"}};
  EXPECT_EQ(d.fill(&r, &reason), 400);
  EXPECT_EQ(reason, "Host differs from :authority");
  d.fields.clear();
  d.authority = "a b";
  EXPECT_EQ(d.fill(&r, &reason), 400);
  d.authority = "user@a.example";
  EXPECT_EQ(d.fill(&r, &reason), 400);
}

TEST(RequestSetHead, TargetsAreJudgedAsTheRequestLineIs) {
  Decoded d;
  Request r;
  std::string_view reason;
  d.path = "/a b";
  EXPECT_EQ(d.fill(&r, &reason), 400);
  d.path = std::string("/a\x01", 3);
  EXPECT_EQ(d.fill(&r, &reason), 400);
  d.path = "/" + std::string(8192, 'a');
  EXPECT_EQ(d.fill(&r, &reason), 414);
  d.path = "*";
  EXPECT_EQ(d.fill(&r, &reason), 400);  // asterisk-form outside OPTIONS
  d.method = "OPTIONS";
  EXPECT_EQ(d.fill(&r, &reason), 0) << reason;
  d.method = "CONNECT";
  d.scheme = d.path = "";
  d.authority = "a.example:443";
  ASSERT_EQ(d.fill(&r, &reason), 0) << reason;
  EXPECT_EQ(r.method(), Method::kConnect);
  EXPECT_EQ(r.target(), "a.example:443");
  d.authority = "a.example";
  EXPECT_EQ(d.fill(&r, &reason), 400);  // CONNECT needs a port
  d.method = "BREW";
  d.scheme = "http";
  d.path = "/";
  ASSERT_EQ(d.fill(&r, &reason), 0) << reason;
  EXPECT_EQ(r.method(), Method::kOther);
  EXPECT_EQ(r.method_text(), "BREW");
}

TEST(RequestSetHead, TooManyFieldsIs431AndBadFieldsAre400) {
  Decoded d;
  d.max_headers = 2;
  d.fields = {{"a", "1"}, {"b", "2"}, {"c", "3"}};
  Request r;
  std::string_view reason;
  EXPECT_EQ(d.fill(&r, &reason), 431);
  d.fields.pop_back();
  EXPECT_EQ(d.fill(&r, &reason), 0) << reason;
  d.fields = {{"content-length", "1"}, {"content-length", "2"}};
  EXPECT_EQ(d.fill(&r, &reason), 400);
  d.fields = {{"content-length", "x"}};
  EXPECT_EQ(d.fill(&r, &reason), 400);
}

TEST(RequestSetHead, ANewHeadForgetsTheLastOnesFields) {
  Decoded d;
  d.fields = {{"x-request-id", "abc"}, {"range", "bytes=0-1"}};
  Request r;
  std::string_view reason;
  ASSERT_EQ(d.fill(&r, &reason), 0);
  EXPECT_EQ(r.id(), "abc");
  EXPECT_EQ(r.header(FieldId::kRange), "bytes=0-1");
  d.fields = {{"accept", "*/*"}};
  ASSERT_EQ(d.fill(&r, &reason), 0);
  EXPECT_EQ(r.header(FieldId::kRange), "");
  EXPECT_EQ(r.headers().size(), 1u);
  EXPECT_NE(r.id(), "abc");
  EXPECT_EQ(r.id().size(), 32u);
}

}  // namespace
}  // namespace tern::http
