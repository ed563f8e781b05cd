#include "http/request.h"

#include <algorithm>
#include <array>
#include <optional>
#include <random>

#include "http/chars.h"
#include "http/field_values.h"

namespace tern::http {
namespace {

using chars::kAlpha;
using chars::kDigit;
using chars::kHex;
using chars::kRegName;

bool has_class(char c, uint8_t cls) { return chars::has(c, cls); }
using chars::is_tchar;

// The outcome of a check; status 0 means the request may proceed.
struct Verdict {
  int status = 0;
  std::string_view reason;
  bool ok() const { return status == 0; }
};
constexpr Verdict kFine{};
constexpr Verdict bad(std::string_view reason) { return {400, reason}; }

constexpr auto npos = std::string_view::npos;

using chars::trim_ows;

using fields::for_each_element;

// The end of the reg-name at the front of s (RFC 3986 3.2.2), or npos if a
// '%' there is not followed by two hex digits.
size_t reg_name_end(std::string_view s) {
  size_t i = 0;
  for (;;) {
    while (i < s.size() && has_class(s[i], kRegName)) ++i;
    if (i == s.size() || s[i] != '%') return i;
    if (i + 2 >= s.size() || !has_class(s[i + 1], kHex) || !has_class(s[i + 2], kHex)) {
      return npos;
    }
    i += 3;
  }
}

bool valid_ip_literal(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!has_class(c, kHex) && c != ':' && c != '.') return false;
  }
  return true;
}

// uri-host [ ":" port ] (RFC 9110 7.2, RFC 3986 3.2.2): a reg-name (which
// covers IPv4) or an IPv6 literal in brackets, then optional port digits.
// Anything else, whitespace and userinfo included, is refused.
bool valid_authority(std::string_view s, bool need_port) {
  size_t host_end = 0;
  if (!s.empty() && s.front() == '[') {
    size_t close = s.find(']');
    if (close == npos || !valid_ip_literal(s.substr(1, close - 1))) return false;
    host_end = close + 1;
  } else {
    host_end = reg_name_end(s);
    if (host_end == 0 || host_end == npos) return false;
  }
  std::string_view rest = s.substr(host_end);
  if (rest.empty()) return !need_port;
  if (rest.front() != ':') return false;
  std::string_view port = rest.substr(1);
  for (char c : port) {
    if (!has_class(c, kDigit)) return false;
  }
  return !need_port || !port.empty();
}

struct TargetParts {
  std::string_view path;
  std::string_view query;
  std::string_view origin;     // path and query: the target in origin-form
  std::string_view authority;  // an absolute-form target's; empty otherwise
  std::string_view scheme;     // an absolute-form target's; empty otherwise
};

TargetParts split_query(std::string_view s) {
  size_t q = s.find('?');
  if (q == npos) return {s, {}, s, {}, {}};
  return {s.substr(0, q), s.substr(q + 1), s, {}, {}};
}

// absolute-form (RFC 9112 3.2.2): scheme "://" authority path-abempty
// [ "?" query ]. An empty path means "/", which comes from static storage.
Verdict split_absolute(std::string_view target, TargetParts* parts) {
  size_t sep = target.find("://");
  if (sep == npos || sep == 0 || !has_class(target[0], kAlpha)) {
    return bad("malformed request-target");
  }
  for (char c : target.substr(0, sep)) {
    if (!has_class(c, kAlpha | kDigit) && c != '+' && c != '-' && c != '.') {
      return bad("malformed scheme in request-target");
    }
  }
  std::string_view rest = target.substr(sep + 3);
  size_t authority_end = std::min(rest.find_first_of("/?"), rest.size());
  const std::string_view authority = rest.substr(0, authority_end);
  if (!valid_authority(authority, false)) {
    return bad("malformed authority in request-target");
  }
  *parts = split_query(rest.substr(authority_end));
  parts->authority = authority;
  parts->scheme = target.substr(0, sep);
  if (parts->path.empty()) parts->path = "/";  // origin stays "" or "?query": see interpret_head
  return kFine;
}

// The four forms of RFC 9112 3.2, each only where it belongs: authority-form
// for CONNECT alone, asterisk-form for OPTIONS alone.
Verdict split_target(Method method, std::string_view target, TargetParts* parts) {
  if (method == Method::kConnect) {
    if (!valid_authority(target, true)) return bad("CONNECT needs host:port");
    *parts = {};
    return kFine;
  }
  if (target.front() == '/') {
    *parts = split_query(target);
    return kFine;
  }
  if (target == "*") {
    if (method != Method::kOptions) return bad("asterisk-form outside OPTIONS");
    *parts = {target, {}, target, {}, {}};
    return kFine;
  }
  return split_absolute(target, parts);
}

// What the fields say about the message, gathered in one pass.
struct HeadFacts {
  std::string_view host;
  size_t hosts = 0;
  std::optional<uint64_t> content_length;
  fields::TransferCodings codings;
  fields::ConnectionOptions connection;
  bool expect_continue = false;
  bool keep_alive = false;
  BodyFraming framing = BodyFraming::kNone;
};

Verdict note_host(std::string_view value, HeadFacts* f) {
  if (++f->hosts > 1) return bad("repeated Host");
  // RFC 9110 7.2 allows an empty Host only for a target URI without an
  // authority, which no origin server serves; nginx refuses it too.
  if (value.empty()) return bad("empty Host");
  if (!valid_authority(value, false)) return bad("malformed Host");
  f->host = value;
  return kFine;
}

void note_expect(std::string_view value, HeadFacts* f) {
  for_each_element(value, [f](std::string_view e) {
    if (iequals(e, "100-continue")) f->expect_continue = true;
    return true;
  });
}

Verdict note_field(const Header& h, HeadFacts* f) {
  switch (h.id) {
    case FieldId::kHost: return note_host(h.value, f);
    case FieldId::kConnection: f->connection.note(h.value); break;
    case FieldId::kContentLength:
      if (!fields::note_content_length(h.value, &f->content_length)) {
        return bad("invalid or conflicting Content-Length");
      }
      break;
    case FieldId::kTransferEncoding: f->codings.note(h.value); break;
    case FieldId::kExpect: note_expect(h.value, f); break;
    default: break;
  }
  return kFine;
}

// RFC 9112 6.1 and 6.3. The order of the Transfer-Encoding checks is a
// choice: a list that does not end in chunked leaves the length unknown,
// which is a framing error (400) whatever the codings are; only a
// well-framed list with a coding we lack gets 501.
Verdict judge_framing(Version version, HeadFacts* f) {
  const fields::TransferCodings& codings = f->codings;
  if (!codings.seen) {
    f->framing = f->content_length ? BodyFraming::kContentLength : BodyFraming::kNone;
    return kFine;
  }
  if (version == Version::kHttp10) return bad("Transfer-Encoding in HTTP/1.0");
  if (f->content_length) return bad("both Transfer-Encoding and Content-Length");
  if (codings.malformed) return bad("malformed Transfer-Encoding");
  if (!codings.last_chunked) return bad("final transfer coding is not chunked");
  if (codings.chunked > 1) return bad("chunked applied more than once");
  if (codings.others > 0) return {501, "transfer coding not implemented"};
  f->framing = BodyFraming::kChunked;
  return kFine;
}

// `authority`: HTTP/2's :authority, empty for HTTP/1.
Verdict judge_fields(Version version, std::span<const Header> headers, std::string_view authority, HeadFacts* f) {
  for (const Header& h : headers) {
    Verdict v = note_field(h, f);
    if (!v.ok()) return v;
  }
  if (!authority.empty()) {
    // RFC 9113 8.3.1: it stands for Host, and a Host beside it names the same.
    if (!valid_authority(authority, false)) return bad("malformed :authority");
    if (f->hosts > 0 && !iequals(f->host, authority)) return bad("Host differs from :authority");
    f->host = authority;
    f->hosts = 1;
  }
  if (version != Version::kHttp10 && f->hosts == 0) return bad("missing Host");
  Verdict v = judge_framing(version, f);
  if (!v.ok()) return v;
  f->keep_alive = !f->connection.close && (version != Version::kHttp10 || f->connection.keep_alive);
  // RFC 9110 10.1.1: a 100-continue expectation in HTTP/1.0 is ignored.
  if (version == Version::kHttp10) f->expect_continue = false;
  return kFine;
}

}  // namespace

std::string_view version_name(Version version) {
  switch (version) {
    case Version::kHttp10: return "HTTP/1.0";
    case Version::kHttp11: return "HTTP/1.1";
    case Version::kHttp2: return "HTTP/2.0";
  }
  return "HTTP/1.1";
}

std::string_view method_name(Method method) {
  switch (method) {
    case Method::kGet: return "GET";
    case Method::kHead: return "HEAD";
    case Method::kPost: return "POST";
    case Method::kPut: return "PUT";
    case Method::kDelete: return "DELETE";
    case Method::kOptions: return "OPTIONS";
    case Method::kPatch: return "PATCH";
    case Method::kTrace: return "TRACE";
    case Method::kConnect: return "CONNECT";
    case Method::kPurge: return "PURGE";
    case Method::kOther: break;
  }
  return "OTHER";
}

// Only ASCII letters fold: field names and tokens are ASCII, and folding by
// locale (std::tolower) would be both slower and wrong for bytes >= 0x80.
bool iequals_same_size(std::string_view a, std::string_view b) {
  for (size_t i = 0; i < a.size(); ++i) {
    auto x = static_cast<unsigned char>(a[i]);
    auto y = static_cast<unsigned char>(b[i]);
    if (x == y) continue;
    if ((x | 0x20) != (y | 0x20)) return false;
    unsigned lower = x | 0x20;
    if (lower < 'a' || lower > 'z') return false;
  }
  return true;
}

std::string_view Request::header(std::string_view name) const {
  for (size_t i = 0; i < header_count_; ++i) {
    if (iequals(headers_[i].name, name)) return headers_[i].value;
  }
  return {};
}

bool Request::has_header(std::string_view name) const {
  for (size_t i = 0; i < header_count_; ++i) {
    if (iequals(headers_[i].name, name)) return true;
  }
  return false;
}

namespace {

bool usable_request_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' ||
           c == '.';
  });
}

// splitmix64, one per thread: ids need to be unique, not secret.
uint64_t next_random() {
  thread_local uint64_t state = [] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }();
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

std::string_view Request::id() const {
  if (id_kind_ == 0) {
    if (usable_request_id(header(FieldId::kXRequestId))) {
      id_kind_ = 1;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      for (size_t half = 0; half < 2; ++half) {
        uint64_t bits = next_random();
        for (size_t i = 0; i < 16; ++i, bits >>= 4) id_[half * 16 + i] = kHex[bits & 0xf];
      }
      id_kind_ = 2;
    }
  }
  return id_kind_ == 1 ? header(FieldId::kXRequestId) : std::string_view(id_.data(), id_.size());
}

void Request::replace_fields(std::span<const std::string> names, std::span<const Header> fields) const {
  size_t kept = 0;
  for (size_t i = 0; i < header_count_; ++i) {
    const Header& h = headers_[i];
    const bool named = std::any_of(names.begin(), names.end(), [&h](const std::string& n) { return iequals(n, h.name); });
    if (!named) headers_[kept++] = h;
  }
  header_count_ = kept;
  for (const Header& field : fields) {
    std::string& text = added_fields_.emplace_back();
    text.reserve(field.name.size() + field.value.size());
    text.append(field.name).append(field.value);
    const std::string_view all = text;
    const Header added{all.substr(0, field.name.size()), all.substr(field.name.size()), field_id(field.name)};
    if (header_count_ < headers_.size()) {
      headers_[header_count_] = added;
    } else {
      headers_.push_back(added);
    }
    ++header_count_;
  }
}

int Request::interpret_head(std::string_view authority, std::string_view* reason) {
  id_kind_ = 0;  // a new request, a new id
  // Nor what the last one's access checks found (its user goes with
  // set_received_ms()).
  granted_by_.clear();
  added_fields_.clear();
  absolute_ = false;
  uri_ = {};
  uri_made_.clear();
  TargetParts parts;
  Verdict v = split_target(method_, target_, &parts);
  HeadFacts facts;
  if (v.ok()) v = judge_fields(version_, headers(), authority, &facts);
  if (!v.ok()) {
    *reason = v.reason;
    return v.status;
  }
  path_ = parts.path;
  query_ = parts.query;
  // RFC 9112 3.2.2: an absolute-form target's authority is the request's
  // host; the Host field is ignored (it was still checked above).
  host_ = parts.authority.empty() ? facts.host : parts.authority;
  absolute_ = !parts.authority.empty();
  scheme_ = parts.scheme;
  uri_ = parts.origin;
  if (absolute_ && (uri_.empty() || uri_.front() != '/')) {
    // "http://a.example" or "http://a.example?x": the path is "/".
    uri_made_.reserve(1 + uri_.size());
    uri_made_.push_back('/');
    uri_made_.append(uri_);
  }
  keep_alive_ = facts.keep_alive;
  framing_ = facts.framing;
  content_length_ = facts.content_length.value_or(0);
  expect_continue_ = facts.expect_continue;
  return 0;
}

namespace {

// A request-target's bytes are VCHAR, as the HTTP/1 request line allows.
bool valid_target(std::string_view target) {
  for (char c : target) {
    if (!chars::is_vchar(c)) return false;
  }
  return !target.empty();
}

}  // namespace

void Request::move_head(const char* to) {
  const auto from = reinterpret_cast<uintptr_t>(head_at_);
  const uintptr_t end = from + head_size_;
  auto move = [&](std::string_view& view) {
    const auto at = reinterpret_cast<uintptr_t>(view.data());
    // An empty view at the head's end moves too.
    if (at >= from && at + view.size() <= end) view = std::string_view(to + (at - from), view.size());
  };
  for (std::string_view* view : {&method_text_, &target_, &uri_, &path_, &query_, &host_, &scheme_, &body_}) move(*view);
  for (size_t i = 0; i < header_count_; ++i) {
    move(headers_[i].name);
    move(headers_[i].value);
  }
  head_at_ = to;
}

int Request::set_head(Version version, const DecodedHead& head, std::string_view* reason) {
  method_text_ = head.method;
  method_ = method_from_token(head.method);
  version_ = version;
  target_ = method_ == Method::kConnect ? head.authority : head.path;
  head_size_ = 0;
  head_at_ = nullptr;
  if (target_.size() > head.max_target) {
    *reason = "request-target too long";
    return 414;
  }
  if (!valid_target(target_)) {
    *reason = "invalid byte in request-target";
    return 400;
  }
  if (head.fields->size() > head.max_headers) {
    *reason = "too many header fields";
    return 431;
  }
  header_count_ = head.fields->size();
  headers_.swap(*head.fields);
  const int status = interpret_head(head.authority, reason);
  if (status != 0) return status;
  scheme_ = head.scheme;
  if (framing_ == BodyFraming::kNone && head.body_of_unknown_length) framing_ = BodyFraming::kChunked;
  return 0;
}

bool is_precondition_or_range(const Header& field) {
  switch (field.id) {
    case FieldId::kIfNoneMatch:
    case FieldId::kIfModifiedSince:
    case FieldId::kIfRange:
    case FieldId::kRange:
      return true;
    default:
      return iequals(field.name, "If-Match") || iequals(field.name, "If-Unmodified-Since");
  }
}

}  // namespace tern::http
