// UpstreamCache: a location's [[cache]] in front of its application (a
// proxy or a FastCGI block), as nginx's proxy_cache and fastcgi_cache.
//
//   UpstreamCache::Miss miss;
//   if (cache->answer(route, exchange, &miss)) return;  // answered from the zone
//   cache->fetch(exchange, std::move(miss), [...](http::Exchange& ex, UpstreamCache::Forward f) {
//     options.extra_header_value = f.status;           // Cache-Status
//     forward.added = f.asks.conditions;               // a revalidation's
//     Call::start<Codec>(ex, group, options, std::move(f.tap), ...);
//   });
//
// A GET or HEAD is looked up by its key (`key`, "$scheme$host$request_uri"
// by default). A fresh entry answers it: with 412 when If-Match or
// If-Unmodified-Since fails, 304 when its validators match
// If-None-Match or If-Modified-Since, a single range of its body for
// Range (206, or 416), the head alone for HEAD; its body from memory when
// small, else from its file by sendfile; compressed as the location would
// compress the application's response. A request with Authorization is
// answered from an entry only when the response said public, s-maxage or
// must-revalidate (RFC 9111 3.5).
//
// Otherwise the request goes to the application, and a GET's response
// fills the entry as it streams to the client (the Tap,
// upstream_cache_tap.h); a client that goes away leaves the call reading
// on for the entry until the Tap knows it stores nothing (upstream/call.h).
// A request that fills goes without its preconditions and Range, which
// are answered from a response the entry takes, as the entry answers them
// (a 304 or 412, the head alone; a 206 once its range has come): the call
// then reads on for the entry as for a client that went.
// With `lock` (the default), one request fills a key at a time, and one
// each variant of a key with Vary: the others that miss it wait for that
// fill, up to lock_timeout, then are answered from the entry it made
// ("fwd=uri-miss; collapsed", "fwd=vary-miss; collapsed"), even when that has
// gone stale meanwhile (a short lifetime, or a slow wake-up): the response
// came after their requests did (not one that may never be served stale:
// must-revalidate, s-maxage). When the fill failed
// (no answer, one cut short, a server error not kept), the first of them
// to wake fills the entry in its place and the others wait on, as nginx's
// proxy_cache_lock. When it stored a variant other than theirs (the
// key was cold, and its response named Vary), they wait for their own
// variant's fill the same way, the first of each variant to wake filling
// it. When the response was not one to keep, or lock_timeout ran out,
// they go to the application themselves. A fill under way for
// lock_age is taken over by the next miss, which fills it too (its first
// filler may be stuck: nginx's proxy_cache_lock_age). A response is stored when
// cache/freshness.h allows, complete, and its file could be written (a
// full disk loses the entry, never the response: a log line says why). A
// response with Vary is stored under its key and the request's values of
// the fields it names, with a marker under the key alone that names them.
//
// A stale entry (its lifetime over, or no-cache) is revalidated: the fill
// asks with If-None-Match / If-Modified-Since from its ETag and
// Last-Modified (`revalidate`), and a 304 makes it fresh again with the
// 304's fields, answering the request from it (a 304 naming another ETag
// updates nothing: the entry goes, and answers this request as it was
// stored, "detail=mismatch"); its body is copied into
// the entry's new file, on a task thread when it is in a file (those who
// wait for the entry wait for that copy). Any other response replaces it. While the fill runs, those who
// wait for it may be answered from the stale entry (use_stale "updating",
// or the entry's stale-while-revalidate), and so is the request that
// makes the fill (`background_update`, on by default): the fill then runs
// on a request of the server's own, whose response only fills the entry,
// as nginx's proxy_cache_background_update. When the application fails (no
// connection, a broken response: "error"; "timeout"; a status named in
// use_stale), the stale entry answers instead, as it does within its
// stale-if-error (RFC 5861) for those failures and 500, 502, 503, 504;
// never an entry that said must-revalidate, proxy-revalidate, s-maxage or
// no-cache.
//
// A response below 400 to another method than GET, HEAD, OPTIONS and
// TRACE (POST, PUT, DELETE...) ends the entry of the key its request makes,
// variants and all (RFC 9111 4.4; nginx keeps it). A request that says
// Cache-Control: no-store is not stored (RFC 9111 5.2.1.5), though an
// entry may answer it.
//
// PURGE, from a network `purge` names, removes the entries of the key the
// request makes (every variant of it), or with a target ending in '*' of
// every key that begins with the key made from what precedes it: 200, or
// 404 when there was no entry; 403 from elsewhere. The key's own entry
// goes at once, file and all; its variants and a prefix's entries go from
// the index at once and their files within seconds (the zone's manager).
//
// Every response of a cached location carries Cache-Status (RFC 9211):
// "tern; hit; ttl=N", "tern; fwd=uri-miss", "tern; fwd=vary-miss",
// "tern; fwd=stale", "tern; fwd=request" (an entry the request's
// Authorization may not use), "tern; fwd=method", "tern; fwd=bypass"
// (`bypass` said so: the response may still fill the entry, unless
// `no_store` says no); a revalidated entry
// "tern; fwd=stale; fwd-status=304; ttl=N"; a stale entry in place of a
// failure "tern; fwd=stale[; fwd-status=503]; ttl=-N; detail=error|timeout|status",
// and while another request refreshes it "tern; hit; ttl=-N; detail=updating".
//
// Built with its location's handler; shares the zone with every other
// user. Its start() runs on a loop thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/freshness.h"
#include "cache/zone.h"
#include "http/range.h"
#include "server/config/cache_config.h"
#include "server/handlers/variable_text.h"
#include "upstream/call.h"

namespace tern::files {
class OpenFile;
}

namespace tern::server {

class CacheZones;
class Metrics;
struct Route;

class UpstreamCache {
 public:
  // `zone`, one of `zones` (whose loops keep its entry files open), and
  // `metrics` (null: not counted) outlive it.
  UpstreamCache(const CacheZones* zones, cache::Zone* zone, const CacheUseConfig& config, Metrics* metrics);

  // What answer() found, for fetch().
  struct Miss {
    std::string key;
    const char* status = "tern; fwd=uri-miss";  // the response's Cache-Status
    bool fill = false;                          // a GET or HEAD: its response may fill the entry
    bool invalidate = false;                    // an unsafe method: a success ends the key's entry
    std::shared_ptr<const cache::Stored> stale;  // the key's entry, stale
    // The fill the request takes or waits for: its variant's when the key
    // has a marker (Vary), so that each variant fills on its own; else the
    // key's. Set by the lookup.
    cache::KeyHash lock;
    bool bypass = false;                         // `bypass` said so: no lock, no lookup
    // The key was looked up (a GET or HEAD): counted as a miss if the
    // request goes to the application (go()), not if it waited and was
    // answered from the entry.
    bool looked_up = false;
  };
  // What the request to the application carries for the cache (copied
  // into a request writer that may run again for a retry).
  struct Asks {
    // The cache wants the whole response: the client's preconditions and
    // Range stay behind (ForwardOptions and CgiContext whole_response).
    bool whole_response = false;
    // Preconditions sent in place of the client's (a revalidation's
    // If-None-Match and If-Modified-Since); views held by the tap.
    std::span<const http::Header> conditions;
    // The method asked of the application in place of the client's: GET
    // for a HEAD that fills the entry, so that the entry has the body a GET
    // is answered with (the client still gets the head alone), as nginx's
    // proxy_cache_convert_head. Empty: the client's.
    std::string_view method;
  };
  // What the call to the application is given.
  struct Forward {
    // The call's tap (null: the cache has no part in the response).
    std::unique_ptr<upstream::ResponseTap> tap;
    Asks asks;
    std::string_view status;  // the response's Cache-Status
  };
  // Starts the call to the application for `exchange`. May run after
  // fetch() returned (a request that waited), on the exchange's loop;
  // everything it needs of the route it holds.
  using Fetch = std::function<void(http::Exchange&, Forward)>;

  // Answers the exchange from the zone (true: finished), or says in *miss
  // what fetch() needs.
  bool answer(const Route& route, http::Exchange& exchange, Miss* miss) const;
  // Goes to the application for a miss: at once, or after the fill under
  // way for its key (see above).
  void fetch(http::Exchange& exchange, Miss miss, Fetch fetch) const;

 private:
  struct Wait;
  class Tap;

  // Ends the entry of `key` (and its variants): a success to an unsafe
  // method on it (RFC 9111 4.4). Any loop.
  void invalidate(const std::string& key) const;
  // Answers a PURGE (see CacheUseConfig::purge).
  void purge(const Route& route, http::Exchange& exchange) const;
  // `collapsed`: the Cache-Status of a request that waited for the fill;
  // an entry stored after the zone's count of inserts was `waited_from`
  // answers it even when stale (not one of no-cache or must-revalidate).
  bool answer_key(http::Exchange& exchange, Miss* miss, std::string_view collapsed,
                  uint64_t waited_from = UINT64_MAX) const;
  // Starts the call with a tap when the cache has a part in the response;
  // `lock`: the ticket of the fill of its key it holds (0: none).
  void go(http::Exchange& exchange, Miss& miss, const Fetch& fetch, bool fill, uint64_t lock) const;
  // What a request's preconditions, conditional fields and Range make of
  // a 200 with these validators (RFC 9110 13.2.2: If-Match and
  // If-Unmodified-Since first, then If-None-Match or If-Modified-Since),
  // and for a GET of a body of known size its Range (14.2: one range,
  // If-Range compared strongly). Asked of an entry that answers, and of a
  // fill's response, whose request went to the application without them.
  struct Conditional {
    enum Kind : uint8_t { kWhole, kPreconditionFailed, kNotModified, kRange, kUnsatisfiable };
    Kind kind = kWhole;
    http::RangeResult range;  // kRange
  };
  static Conditional conditional(const http::Request& request, std::string_view etag, std::string_view last_modified,
                                 std::optional<uint64_t> body_size);
  // Answers from `entry` with `status` as its Cache-Status (empty: a hit's,
  // "tern; hit; ttl=N"). Leaves the exchange unstarted when the entry's
  // file went.
  void serve(const cache::Stored& entry, int64_t now, http::Exchange& exchange, std::string_view status) const;
  // Whether a stale entry may answer in place of the application's
  // `status` (`failure`: the call's own, 502 or 504).
  bool may_serve_stale(const cache::EntryHead& head, int64_t now, int status, bool failure) const;
  // Whether a stale entry may answer while another request refreshes it.
  bool may_serve_updating(const cache::EntryHead& head, int64_t now) const;
  // Answers from a stale entry while it is refreshed ("detail=updating");
  // false (nothing started) when its file went.
  bool serve_updating(const cache::Stored& entry, int64_t now, http::Exchange& exchange) const;
  // The filler of `hash`, whose stale entry may answer while updating:
  // answers from it and hands the fill (miss, fetch) to a request of the
  // server's own (background_exchange.h). False when the entry could not
  // answer: the caller fills as usual.
  bool refresh_in_background(http::Exchange& exchange, Miss& miss, Fetch& fetch, const cache::KeyHash& hash,
                             uint64_t lock, int64_t now) const;
  // The file of `entry` (not in memory), open: the one this loop holds when
  // it is the file the index knows, else opened now. Null when it went or
  // is not as long as its head says.
  std::shared_ptr<const files::OpenFile> open_file(const cache::Stored& entry) const;

  const CacheZones* const zones_;
  cache::Zone* const zone_;
  const VariableText key_;
  const cache::Policy policy_;
  const bool lock_;
  const std::chrono::milliseconds lock_timeout_;
  const std::chrono::milliseconds lock_age_;
  const bool revalidate_;
  const bool background_update_;
  const CacheUseConfig::UseStale use_stale_;
  const std::vector<VariableText> bypass_;
  const std::vector<VariableText> no_store_;
  const std::vector<Cidr> purge_;
  Metrics* const metrics_;
};

// The cache of a location's `use`, on its zone among `zones`. Throws
// std::runtime_error when there is no such zone (a reload named one that
// only a restart makes).
std::unique_ptr<UpstreamCache> make_upstream_cache(const CacheZones* zones, const CacheUseConfig& use,
                                                   Metrics* metrics);

}  // namespace tern::server
