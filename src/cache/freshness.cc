#include "cache/freshness.h"

#include <algorithm>
#include <cstdint>

#include "http/chars.h"
#include "http/field_values.h"
#include "http/http_date.h"

namespace tern::cache {
namespace {

// RFC 9111 1.2.2: a delta-seconds too large to represent counts as 2^31.
constexpr int64_t kMaxSeconds = int64_t{1} << 31;
// Far enough for any Unix time in an "@T" X-Accel-Expires, small enough
// that the arithmetic on it cannot overflow.
constexpr int64_t kMaxUnixTime = int64_t{1} << 40;

// 1*DIGIT, capped at `cap` (at most 2^40, so v * 10 + 9 stays in range);
// nullopt when empty or when anything else is in it.
std::optional<int64_t> digits(std::string_view text, int64_t cap) {
  if (text.empty()) return std::nullopt;
  int64_t value = 0;
  for (char c : text) {
    if (!http::chars::is_digit(c)) return std::nullopt;
    if (value < cap) value = value * 10 + (c - '0');
  }
  return std::min(value, cap);
}

std::optional<int64_t> delta_seconds(std::string_view text) { return digits(text, kMaxSeconds); }

int64_t clamp_lifetime(int64_t seconds) { return std::clamp<int64_t>(seconds, 0, kMaxSeconds); }

// Calls f(name, value) for each directive of a Cache-Control list, the value
// without its quotes ("" for a bare one), until f returns false. Commas split
// elements only outside a quoted-string, so private="a, b" stays one; an
// unterminated quote runs to the end of the list.
template <typename F>
void for_each_directive(std::string_view list, F f) {
  size_t start = 0;
  bool quoted = false;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size()) {
      const char c = list[i];
      if (quoted && c == '\\') {
        ++i;  // a quoted-pair: the next byte is literal, even a quote
        continue;
      }
      if (c == '"') quoted = !quoted;
      if (quoted || c != ',') continue;
    }
    const std::string_view element = http::chars::trim_ows(list.substr(start, i - start));
    start = i + 1;
    if (element.empty()) continue;
    const size_t eq = element.find('=');
    const std::string_view name = http::chars::trim_ows(element.substr(0, eq));
    std::string_view value;
    if (eq != std::string_view::npos) {
      value = http::chars::trim_ows(element.substr(eq + 1));
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    }
    if (!f(name, value)) return;
  }
}

// The Cache-Control directives decide() reads, from every Cache-Control
// field of a response; the first occurrence of each wins.
struct CacheControl {
  bool no_store = false;
  bool no_cache = false;
  bool is_private = false;
  bool is_public = false;
  bool must_revalidate = false;
  bool proxy_revalidate = false;
  std::optional<std::string_view> s_maxage;
  std::optional<std::string_view> max_age;
  std::optional<std::string_view> stale_while_revalidate;
  std::optional<std::string_view> stale_if_error;

  void note(std::string_view list) {
    for_each_directive(list, [this](std::string_view name, std::string_view value) {
      auto first = [&](std::optional<std::string_view>* slot) {
        if (!*slot) *slot = value;
      };
      if (http::iequals(name, "no-store")) no_store = true;
      else if (http::iequals(name, "no-cache")) no_cache = true;
      else if (http::iequals(name, "private")) is_private = true;
      else if (http::iequals(name, "public")) is_public = true;
      else if (http::iequals(name, "must-revalidate")) must_revalidate = true;
      else if (http::iequals(name, "proxy-revalidate")) proxy_revalidate = true;
      else if (http::iequals(name, "s-maxage")) first(&s_maxage);
      else if (http::iequals(name, "max-age")) first(&max_age);
      else if (http::iequals(name, "stale-while-revalidate")) first(&stale_while_revalidate);
      else if (http::iequals(name, "stale-if-error")) first(&stale_if_error);
      return true;
    });
  }
};

// What of a response's fields decide() reads, in one pass. For the single
// fields (Expires, Date, Age, X-Accel-Expires) the first one wins.
struct Fields {
  CacheControl cc;
  std::optional<std::string_view> x_accel_expires;
  std::optional<std::string_view> expires;
  std::optional<std::string_view> date;
  std::optional<std::string_view> age;
  bool set_cookie = false;
  bool vary_star = false;
  bool validator = false;  // ETag or Last-Modified

  explicit Fields(std::span<const http::Header> response) {
    for (const http::Header& h : response) {
      auto first = [&h](std::optional<std::string_view>* slot) {
        if (!*slot) *slot = h.value;
      };
      if (http::iequals(h.name, "Cache-Control")) {
        cc.note(h.value);
      } else if (http::iequals(h.name, "Set-Cookie")) {
        set_cookie = true;
      } else if (http::iequals(h.name, "Vary")) {
        vary_star |= !http::fields::for_each_element(h.value, [](std::string_view e) { return e != "*"; });
      } else if (http::iequals(h.name, "ETag") || http::iequals(h.name, "Last-Modified")) {
        validator |= !h.value.empty();
      } else if (http::iequals(h.name, "X-Accel-Expires")) {
        first(&x_accel_expires);
      } else if (http::iequals(h.name, "Expires")) {
        first(&expires);
      } else if (http::iequals(h.name, "Date")) {
        first(&date);
      } else if (http::iequals(h.name, "Age")) {
        first(&age);
      }
    }
  }
};

// Where a lifetime came from. kAccelAt is a deadline on our own clock, from
// which Age is not taken off.
enum class Source { kNone, kAccel, kAccelAt, kHeaders, kPolicy };

struct Lifetime {
  Source source = Source::kNone;
  int64_t seconds = 0;
};

// X-Accel-Expires as nginx reads it: "N" seconds (0: do not store) or "@T"
// until Unix time T. Absent or malformed: kNone, and the field is ignored.
Lifetime accel_lifetime(const Fields& f, time_t now) {
  if (!f.x_accel_expires) return {};
  std::string_view value = *f.x_accel_expires;
  if (value.starts_with('@')) {
    auto until = digits(value.substr(1), kMaxUnixTime);
    if (!until) return {};
    return {Source::kAccelAt, clamp_lifetime(*until - static_cast<int64_t>(now))};
  }
  auto seconds = delta_seconds(value);
  if (!seconds) return {};
  return {Source::kAccel, *seconds};
}

// s-maxage, max-age, then Expires (RFC 9111 4.2.1). A malformed number or
// an invalid Expires is explicit but already stale (RFC 9111 5.2.2.1, 5.3).
// Expires counts from Date, not from now: the difference between two of the
// origin's clock readings does not suffer from the skew between its clock
// and ours.
Lifetime header_lifetime(const Fields& f, time_t now) {
  if (f.cc.s_maxage) return {Source::kHeaders, delta_seconds(*f.cc.s_maxage).value_or(0)};
  if (f.cc.max_age) return {Source::kHeaders, delta_seconds(*f.cc.max_age).value_or(0)};
  if (!f.expires) return {};
  auto expires = http::parse_http_date(*f.expires);
  if (!expires) return {Source::kHeaders, 0};
  std::optional<time_t> date = f.date ? http::parse_http_date(*f.date) : std::nullopt;
  return {Source::kHeaders, clamp_lifetime(int64_t{*expires} - int64_t{date.value_or(now)})};
}

// Never stored, whatever the policy: interim responses, partial content
// (entries hold whole bodies) and 304 (it freshens a stored response).
bool never_stored(int status) { return status < 200 || status > 599 || status == 206 || status == 304; }

// RFC 9110 15.1's "heuristically cacheable" statuses (less 206), and the
// redirects that are storable only with an explicit lifetime.
bool status_allowed(int status, bool explicit_lifetime, const Policy& policy) {
  switch (status) {
    case 200: case 203: case 204: case 300: case 301: case 308:
    case 404: case 405: case 410: case 414: case 501:
      return true;
    case 302: case 303: case 307:
      if (explicit_lifetime) return true;
      break;
    default:
      break;
  }
  return std::any_of(policy.valid.begin(), policy.valid.end(),
                     [status](const auto& v) { return v.first == status || v.first == 0; });
}

// The policy's lifetime for `status`: the exact status first, then any (0).
std::optional<int64_t> policy_lifetime(int status, const Policy& policy) {
  std::optional<int64_t> any;
  for (const auto& [code, lifetime] : policy.valid) {
    if (code == status) return lifetime.count();
    if (code == 0 && !any) any = lifetime.count();
  }
  return any;
}

Freshness refuse(std::string_view why) {
  Freshness out;
  out.why = why;
  return out;
}

// The stale allowances (RFC 5861). A malformed number allows nothing.
void set_stale(const CacheControl& cc, Freshness* out) {
  if (out->no_stale || out->revalidate) return;  // RFC 9111 4.2.4: no stale use at all
  if (cc.stale_while_revalidate) {
    out->stale_while_revalidate = std::chrono::seconds(delta_seconds(*cc.stale_while_revalidate).value_or(0));
  }
  if (cc.stale_if_error) {
    out->stale_if_error = std::chrono::seconds(delta_seconds(*cc.stale_if_error).value_or(0));
  }
}

}  // namespace

std::optional<std::string_view> directive(std::string_view list, std::string_view name) {
  std::optional<std::string_view> found;
  for_each_directive(list, [&](std::string_view n, std::string_view value) {
    if (http::iequals(n, name)) found = value;
    return !found;
  });
  return found;
}

Freshness decide(int status, std::span<const http::Header> response, bool request_authorized,
                 const Policy& policy, time_t now) {
  if (never_stored(status)) return refuse("status");
  const Fields f(response);
  if (f.vary_star) return refuse("vary *");
  if (f.set_cookie && !policy.store_set_cookie) return refuse("set-cookie");

  // A valid X-Accel-Expires supersedes Cache-Control's storage and lifetime
  // directives and Expires (see the header).
  Lifetime life = accel_lifetime(f, now);
  const bool accel = life.source != Source::kNone;
  if (life.source == Source::kAccel && life.seconds == 0) return refuse("x-accel-expires");
  if (!accel && f.cc.no_store) return refuse("no-store");
  if (!accel && f.cc.is_private) return refuse("private");
  if (request_authorized && !f.cc.is_public && !f.cc.s_maxage && !f.cc.must_revalidate) {
    return refuse("authorization");
  }

  if (!accel) life = header_lifetime(f, now);
  if (!status_allowed(status, life.source != Source::kNone, policy)) return refuse("status");
  // no-cache makes the lifetime 0 whatever it was, so it needs none: it
  // alone says "store, but revalidate each use" (RFC 9111 3, 5.2.2.4).
  const bool no_cache = f.cc.no_cache && !accel;
  if (life.source == Source::kNone) {
    // A configured lifetime of 0 means "do not store", as in nginx, not
    // "store stale", even for no-cache.
    std::optional<int64_t> seconds = policy_lifetime(status, policy);
    if (seconds && *seconds > 0) {
      life = {Source::kPolicy, clamp_lifetime(*seconds)};
    } else if (seconds || !no_cache) {
      return refuse("no lifetime");
    }
  }
  // Only Age, not also the apparent age (now - Date) of RFC 9111 4.2.3: a
  // backend whose clock runs behind ours would otherwise lose every lifetime.
  if (life.source != Source::kAccelAt && f.age) life.seconds -= delta_seconds(*f.age).value_or(0);

  Freshness out;
  out.store = true;
  out.lifetime = std::chrono::seconds(std::max<int64_t>(life.seconds, 0));
  out.revalidate = no_cache;
  if (out.revalidate) out.lifetime = std::chrono::seconds(0);
  if (out.lifetime.count() == 0 && !f.validator) {
    return refuse(out.revalidate ? "no-cache without validator" : "stale without validator");
  }
  out.no_stale = f.cc.must_revalidate || f.cc.proxy_revalidate || f.cc.s_maxage.has_value();
  set_stale(f.cc, &out);
  out.drop_set_cookie = f.set_cookie;
  return out;
}

}  // namespace tern::cache
