// Freshness: whether a shared cache in front of an application (a proxied
// or FastCGI backend, as nginx's proxy_cache) may store one upstream
// response, and for how long it may then serve it: RFC 9111, with RFC 5861
// for stale-while-revalidate and stale-if-error, and nginx's conventions
// where the RFC leaves the choice to the cache.
//
// decide() reads only the status and the response's fields, in this order:
//
//   1. Never stored: 1xx, 206 (a cache here holds whole bodies only) and 304
//      (it updates a stored response, it is not one); Vary with "*"; Set-Cookie
//      unless Policy::store_set_cookie (then stored without it).
//   2. Cache-Control (every field, as one list; first occurrence of a
//      directive wins, as RFC 9111 4.2.1 allows): no-store and private (bare
//      or with field names: we are a shared cache) are not stored. A request
//      with Authorization is stored only when the response says public,
//      s-maxage or must-revalidate (RFC 9111 3.5).
//   3. The lifetime, first that applies, as nginx: X-Accel-Expires ("N"
//      seconds, "@T" until Unix time T, "0" do not store; anything else is
//      ignored), s-maxage, max-age (malformed: 0, stale at once), Expires
//      minus Date (or minus now without Date; an invalid Expires such as "0"
//      is already expired), and without any of these the Policy's default
//      for the status. Neither: not stored (no heuristic freshness). The
//      response's Age is then taken off, except from "@T", which is a
//      deadline on our own clock. Every number caps at 2^31 seconds (RFC
//      9111 1.2.2).
//   4. The status must be cacheable by default (RFC 9110 15.1: 200, 203,
//      204, 300, 301, 308, 404, 405, 410, 414, 501), or 302, 303, 307 with an
//      explicit lifetime from step 3, or be named by Policy::valid (or 0,
//      any, be there).
//   5. no-cache (with or without field names, which we treat as bare: the
//      whole response is revalidated, never a part served) and a lifetime of
//      0 both mean: stored only when there is a validator (ETag or
//      Last-Modified) to revalidate it with. no-cache makes the lifetime 0,
//      so it needs none from step 3 or the Policy (but a 302 still needs an
//      explicit one to pass step 4).
//
// X-Accel-Expires is addressed to this cache alone (it is not passed on), so
// as in nginx it supersedes Cache-Control's no-store, private, no-cache,
// s-maxage and max-age, and Expires: an application may tell browsers
// "no-store" and the proxy "60". It does not lift steps 1 and 4, nor the
// Authorization rule (add "Cache-Control: public" for that).
//
// Free functions without state, no allocation. Any thread.
#pragma once

#include <chrono>
#include <ctime>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "http/request.h"

namespace tern::cache {

// What a location's cache configuration says about lifetimes.
struct Policy {
  // Lifetime per status when the response gives none ("valid = { 200 =
  // "10m", 404 = "1m" }"), looked up by the exact status first, then by 0,
  // which stands for any status (nginx's "any"). Naming a status also makes
  // it storable (step 4); a lifetime of 0 or less means "do not store", so
  // { 0 = "1m", 500 = "0s" } keeps every status but 500.
  std::vector<std::pair<int, std::chrono::seconds>> valid;
  // Store responses that carry Set-Cookie; the entry is then stored without
  // its Set-Cookie fields (Freshness::drop_set_cookie).
  bool store_set_cookie = false;
};

// The verdict on one response. When store is false only `why` means
// anything; every other field keeps its default.
struct Freshness {
  bool store = false;
  // Why not stored, for logs and tests: "status", "vary *", "set-cookie",
  // "no-store", "private", "authorization", "x-accel-expires" (its 0), "no
  // lifetime", "no-cache without validator", "stale without validator".
  // Points to a string literal; empty when stored.
  std::string_view why;
  // How long the response is fresh, counted from now (Age already taken
  // off). 0: stale on arrival, to be revalidated before its first use.
  std::chrono::seconds lifetime{0};
  // How long past `lifetime` it may still be served (RFC 5861): while a
  // revalidation runs in the background, and when the upstream fails. Both
  // are 0 when no_stale or revalidate is set, so that a caller need only
  // read these two numbers.
  std::chrono::seconds stale_while_revalidate{0};
  std::chrono::seconds stale_if_error{0};
  // no-cache: every use must be revalidated first, even right after storing;
  // lifetime is 0. Only stored with a validator.
  bool revalidate = false;
  // must-revalidate, proxy-revalidate or s-maxage (which implies
  // proxy-revalidate): never served stale, whatever else the caller's
  // configuration allows (nginx's use_stale included).
  bool no_stale = false;
  // Stored, but without its Set-Cookie fields (Policy::store_set_cookie).
  bool drop_set_cookie = false;
};

// The verdict on a response with `status` and fields `response`, received
// at `now` (Unix seconds). request_authorized: the request carried
// Authorization.
Freshness decide(int status, std::span<const http::Header> response, bool request_authorized,
                 const Policy& policy, time_t now);

// The value of directive `name` in one Cache-Control list (case-insensitive
// names; commas inside a quoted value do not split it): the value without
// its quotes (a quoted-pair stays escaped, which no directive read here
// needs), "" for a bare directive, nullopt when absent. The first occurrence
// wins.
std::optional<std::string_view> directive(std::string_view list, std::string_view name);

}  // namespace tern::cache
