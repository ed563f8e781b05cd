// Request: the head of one request, whichever protocol carried it: method,
// target (path and query), authority, scheme, version and a field table in
// which the fields tern reads are known by a FieldId. RequestParser fills it
// from HTTP/1 text; HTTP/2 from HPACK through set_head(). Handlers, logs
// and upstream codecs read it alike; only version() tells them apart.
//
// Every string_view points into the bytes it was filled from (the HTTP/1
// connection's input buffer, an HTTP/2 stream's decoded fields) and is
// valid until those are consumed or changed. Only the field table
// allocates, when a head has more fields than any before it in this object.
//
// A value type, filled by the parser; used on one loop thread.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "http/field.h"
#include "net/inet_address.h"

namespace tern::http {

// A request's method (RFC 9110 9).
enum class Method : uint8_t {
  kGet,
  kHead,
  kPost,
  kPut,
  kDelete,
  kOptions,
  kPatch,
  kTrace,
  kConnect,
  kPurge,  // not HTTP's: what caches take to remove an entry (Squid, Varnish, nginx's cache_purge)
  kOther,  // a syntactically valid token we do not know (answered 501)
};

// "GET", "POST", ...; "" for kOther.
std::string_view method_name(Method method);

// kHttp2: a stream of an HTTP/2 connection (logs and applications see
// "HTTP/2.0").
enum class Version : uint8_t { kHttp10, kHttp11, kHttp2 };

// "HTTP/1.0", "HTTP/1.1", "HTTP/2.0" (SERVER_PROTOCOL, the access log's).
std::string_view version_name(Version version);

// A method token (case-sensitive, RFC 9110 9.1): kOther for one not known.
inline Method method_from_token(std::string_view m) {
  switch (m.size()) {
    case 3: return m == "GET" ? Method::kGet : m == "PUT" ? Method::kPut : Method::kOther;
    case 4: return m == "HEAD" ? Method::kHead : m == "POST" ? Method::kPost : Method::kOther;
    case 5:
      return m == "PATCH"   ? Method::kPatch
             : m == "TRACE" ? Method::kTrace
             : m == "PURGE" ? Method::kPurge
                            : Method::kOther;
    case 6: return m == "DELETE" ? Method::kDelete : Method::kOther;
    case 7:
      return m == "OPTIONS" ? Method::kOptions : m == "CONNECT" ? Method::kConnect : Method::kOther;
    default: return Method::kOther;
  }
}

// How the request body is delimited (RFC 9112 section 6).
enum class BodyFraming : uint8_t { kNone, kContentLength, kChunked };

// One field of a request, as received.
struct Header {
  std::string_view name;   // as sent; compare case-insensitively
  std::string_view value;  // without leading and trailing SP / HTAB
  FieldId id = FieldId::kOther;  // field_id(name)
};

// ASCII case-insensitive comparison of two strings of the same length.
bool iequals_same_size(std::string_view a, std::string_view b);

// If-None-Match, If-Modified-Since, If-Match, If-Unmodified-Since, If-Range
// and Range: the fields a cache leaves out of a request it fills an entry
// with, so that the whole response comes back (as nginx's proxy_cache).
bool is_precondition_or_range(const Header& field);
// ASCII case-insensitive comparison, for field names and tokens. Inline:
// most comparisons (a field name against each of a list) end on the
// lengths.
inline bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && iequals_same_size(a, b);
}

class Request {
 public:
  // The default bound on header fields (RequestParser::Limits): generous,
  // so that the header section's size in bytes is what limits a request, as
  // with nginx; a browser behind a few proxies sends about a hundred.
  static constexpr size_t kDefaultMaxHeaders = 1000;

  Method method() const { return method_; }                      // kOther for one not known
  std::string_view method_text() const { return method_text_; }  // the method as sent
  // The request-target exactly as sent ("/a%20b?x=1", or in absolute-form
  // "http://a.example/a%20b?x=1"): the request line's, for logs.
  std::string_view target() const { return target_; }
  // The target in origin-form, path and query as sent ("/a%20b?x=1" for
  // both of those): $request_uri, REQUEST_URI, what goes upstream.
  std::string_view uri() const { return uri_made_.empty() ? uri_ : std::string_view(uri_made_); }
  // Whether the target came in absolute-form (its authority is host()).
  bool absolute_form() const { return absolute_; }
  // The scheme the client named: HTTP/2's :scheme, or an absolute-form
  // target's; empty when it named none (an HTTP/1 origin-form target, whose
  // scheme is the connection's).
  std::string_view scheme() const { return scheme_; }
  // The path before '?', still percent-encoded ("/" for an absolute-form
  // target without one).
  std::string_view path() const { return path_; }
  // The part after '?', without the '?'; empty if none.
  std::string_view query() const { return query_; }
  Version version() const { return version_; }  // the HTTP version it came in

  std::span<const Header> headers() const { return {headers_.data(), header_count_}; }  // every field, in order
  // The first field with this name (case-insensitive), or "" if absent;
  // whether there is one.
  std::string_view header(std::string_view name) const;
  bool has_header(std::string_view name) const;
  // The same for a known name, by its id: no string compares.
  std::string_view header(FieldId id) const {
    for (size_t i = 0; i < header_count_; ++i) {
      if (headers_[i].id == id) return headers_[i].value;
    }
    return {};
  }
  bool has_header(FieldId id) const {
    for (size_t i = 0; i < header_count_; ++i) {
      if (headers_[i].id == id) return true;
    }
    return false;
  }

  // The request's host: HTTP/2's :authority or an absolute-form target's
  // authority, else the Host field (HTTP/1.1 requires exactly one; may be
  // empty in 1.0).
  std::string_view host() const { return host_; }
  // Persistent connection after this request, per RFC 9112 section 9.3:
  // HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with
  // "Connection: keep-alive".
  bool keep_alive() const { return keep_alive_; }
  // How the body is delimited: none, Content-Length or chunked.
  BodyFraming body_framing() const { return framing_; }
  // Valid when body_framing() is kContentLength.
  uint64_t content_length() const { return content_length_; }
  // A body follows the head: chunked, or a Content-Length above 0
  // ("Content-Length: 0" is no body at all).
  bool has_body() const {
    return framing_ == BodyFraming::kChunked || (framing_ == BodyFraming::kContentLength && content_length_ > 0);
  }
  // "Expect: 100-continue" was sent.
  bool expect_continue() const { return expect_continue_; }
  // Bytes of the request line and header section, final CRLF included,
  // counted from the first byte given to the parser (so any empty lines it
  // skipped before the request line are included).
  size_t head_size() const { return head_size_; }

  // The request body, complete (Content-Length or decoded chunked), when a
  // handler runs; empty for requests without one. Set by the transport
  // that read it (Http1Connection; a test's harness).
  std::string_view body() const { return body_; }
  void set_body(std::string_view body) { body_ = body; }

  // A head that a transport decoded itself (HTTP/2, from HPACK), for
  // set_head(). Every view must stay valid while the request is used.
  struct DecodedHead {
    std::string_view method;     // the :method
    std::string_view scheme;     // may be empty (CONNECT)
    std::string_view authority;  // may be empty: then a Host field names it
    std::string_view path;       // empty for CONNECT, whose target is the authority
    // Ids set, names valid tokens. Taken: swapped with the request's own
    // table, whose room comes back in it for the next head.
    std::vector<Header>* fields = nullptr;
    // The body goes on past the head with no content-length to say how far
    // (read as chunked is: to its end).
    bool body_of_unknown_length = false;
    // The longest target (then 414) and the most fields (then 431).
    size_t max_target = 8192;
    size_t max_headers = kDefaultMaxHeaders;
  };
  // Fills the request from a decoded head and judges it as RequestParser
  // judges HTTP/1 text (the same target and field checks, 414 and 431 at
  // the same limits); :authority counts as the Host field, and a Host field
  // beside it must name the same. Returns 0, or the status to answer with
  // *reason set. Keeps the body, the received time and the tag as they are.
  int set_head(Version version, const DecodedHead& head, std::string_view* reason);

  // The text an HTTP/1 parser filled it from, head_size() bytes, was copied
  // to `to` (the transport moves it out of its input buffer): every view
  // into the text now views the copy; those elsewhere (a static "/", the
  // fields replace_fields() added) stay. What parsing the copy again would
  // give, for a fraction of the cost. Only while the text is where the
  // parser found it: head_at() says where that is (null: no HTTP/1 head).
  const char* head_at() const { return head_at_; }
  void move_head(const char* to);

  // When its first byte arrived, in milliseconds of the steady clock (the
  // loop's cached one): what $request_time counts from. Set by the
  // transport; 0 when unknown. Setting it begins a request: the tag, the
  // upstream times, the cache status, the client address and the remote
  // user are reset.
  int64_t received_ms() const { return received_ms_; }
  void set_received_ms(int64_t ms) {
    received_ms_ = ms;
    tag_ = 0;
    upstream_ms_ = -1;
    upstream_open_ms_ = 0;
    cache_status_ = "";
    client_known_ = false;
    remote_user_.clear();
  }

  // The client's address: the connection's (the client its PROXY protocol
  // header named, else its peer), set by the transport as the request
  // begins; then, where the web server is told to believe a trusted
  // proxy's X-Forwarded-For or X-Real-IP (real_ip), the one that names.
  // What allow/deny, balancing by address, throttles, REMOTE_ADDR and
  // the access log's $remote_addr use. has_client_address() is false for a
  // request no transport began (a refusal before any request).
  const net::InetAddress& client_address() const { return client_; }
  bool has_client_address() const { return client_known_; }
  void set_client_address(const net::InetAddress& address) const {
    client_ = address;
    client_known_ = true;
  }

  // The user its credentials proved (basic auth); empty when none did. The
  // access log's $remote_user, FastCGI's REMOTE_USER.
  std::string_view remote_user() const { return remote_user_; }
  void set_remote_user(std::string_view user) const { remote_user_.assign(user); }

  // Fields an access check vouches for (forward auth's copy_headers): each
  // field of the request named in `names` is taken out, and those of
  // `fields` (copied into the request) are added. Views from headers()
  // taken before are not valid after.
  void replace_fields(std::span<const std::string> names, std::span<const Header> fields) const;
  // The access checks that let the request through (a location's forward
  // auth), so that none is asked again when the request resumes after it
  // or after another's (an internal redirect between guarded locations).
  bool granted_by(const void* check) const {
    return std::find(granted_by_.begin(), granted_by_.end(), check) != granted_by_.end();
  }
  void grant(const void* check) const { granted_by_.push_back(check); }

  // The request's id, the same wherever it goes (the access log's
  // $request_id, FastCGI's REQUEST_ID, an upstream's X-Request-Id): the
  // client's X-Request-Id when it is 1 to 64 letters, digits, '-', '_' or
  // '.', else 32 random hex digits made on first use (a generator per
  // thread, seeded from the kernel).
  std::string_view id() const;

  // A number the handler that resolved the request may leave for the
  // response callback (the web server: the metrics series of its site and
  // location); 0 until set, for every request the transport starts.
  uint32_t tag() const { return tag_; }
  void set_tag(uint32_t tag) const { tag_ = tag; }
  // Milliseconds its attempts on upstream servers took, summed (the access
  // log's $upstream_response_time), by `now_ms` (the loop's steady clock):
  // an attempt still open (a client that left while the upstream worked)
  // counts until then. -1 when it went to none.
  int64_t upstream_ms(int64_t now_ms) const {
    if (upstream_open_ms_ == 0) return upstream_ms_;
    return (upstream_ms_ < 0 ? 0 : upstream_ms_) + std::max<int64_t>(now_ms - upstream_open_ms_, 0);
  }
  // An attempt on an upstream server began (at `now_ms`, not 0), and one
  // ended, having taken `ms`.
  void begin_upstream_attempt(int64_t now_ms) const { upstream_open_ms_ = now_ms; }
  void add_upstream_ms(int64_t ms) const {
    upstream_open_ms_ = 0;
    upstream_ms_ = (upstream_ms_ < 0 ? 0 : upstream_ms_) + ms;
  }
  // What a response cache did with the request, as nginx's
  // $upstream_cache_status says it (HIT, MISS, EXPIRED, STALE, UPDATING,
  // REVALIDATED, BYPASS): the access log's $cache_status; "" when no cache
  // had a part. A string literal.
  std::string_view cache_status() const { return cache_status_; }
  void set_cache_status(const char* status) const { cache_status_ = status; }

 private:
  friend class RequestParser;
  friend class Http1Connection;

  // The semantics of a complete head, once the parser has filled in the
  // method, target, version and fields: splits the target into path and
  // query, and derives host, keep-alive, framing and expect-continue (RFC
  // 9110, RFC 9112 3.2 and 6). `authority`: HTTP/2's :authority, which
  // stands for the Host field; empty for HTTP/1. Returns 0, or the status
  // to answer (400, 501) with *reason set. Defined in request.cc, which
  // keeps request_parser.cc about bytes and this file about meaning.
  int interpret_head(std::string_view authority, std::string_view* reason);

  Method method_ = Method::kGet;
  Version version_ = Version::kHttp11;
  BodyFraming framing_ = BodyFraming::kNone;
  bool keep_alive_ = true;
  bool expect_continue_ = false;
  bool absolute_ = false;
  std::string_view method_text_;
  std::string_view target_;
  std::string_view uri_;
  // uri() when it is not a part of the target (an absolute-form target with
  // no path); empty otherwise. Keeps its capacity, as headers_ does.
  std::string uri_made_;

  std::string_view path_;
  std::string_view query_;
  std::string_view host_;
  std::string_view scheme_;
  uint64_t content_length_ = 0;
  size_t head_size_ = 0;
  // Where the parser found the head (HTTP/1); null for HTTP/2's.
  const char* head_at_ = nullptr;

  std::string_view body_;
  mutable size_t header_count_ = 0;
  int64_t received_ms_ = 0;
  mutable uint32_t tag_ = 0;
  mutable bool client_known_ = false;
  mutable int64_t upstream_ms_ = -1;
  mutable int64_t upstream_open_ms_ = 0;  // when the open attempt began; 0: none open
  mutable const char* cache_status_ = "";
  mutable net::InetAddress client_;
  // Keeps its capacity across the pooled object's requests.
  mutable std::string remote_user_;
  // Cleared by every new head.
  mutable std::vector<const void*> granted_by_;  // keeps its capacity
  // The text of the fields replace_fields() added: a deque, whose strings
  // stay where they are as more are added.
  mutable std::deque<std::string> added_fields_;
  // id(): 0 not made yet, 1 the X-Request-Id field, 2 generated into id_.
  mutable uint8_t id_kind_ = 0;
  mutable std::array<char, 32> id_{};
  // Grows to the largest head parsed into this object and keeps that
  // capacity, so a reused Request (Http1Connection pools them) stops
  // allocating. Mutable for replace_fields().
  mutable std::vector<Header> headers_;
};

}  // namespace tern::http
