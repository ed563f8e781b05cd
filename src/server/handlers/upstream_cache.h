// UpstreamCache: a location's [[cache]] in front of its application (a
// proxy or a FastCGI block), as nginx's proxy_cache and fastcgi_cache.
//
//   UpstreamCache::Miss miss;
//   if (cache->answer(route, exchange, &miss)) return;  // answered from the zone
//   cache->fetch(exchange, std::move(miss), [...](http::Exchange& ex, auto tap, std::string_view status) {
//     options.extra_header_value = status;             // Cache-Status
//     Call::start<Codec>(ex, group, options, std::move(tap), ...);
//   });
//
// A GET or HEAD is looked up by its key (`key`, "$scheme$host$request_uri"
// by default). A fresh entry answers it: with 304 when its validators match
// If-None-Match or If-Modified-Since, a single range of its body for
// Range (206, or 416), the head alone for HEAD; its body from memory when
// small, else from its file by sendfile; compressed as the location would
// compress the application's response. A request with Authorization is
// answered from an entry only when the response said public, s-maxage or
// must-revalidate (RFC 9111 3.5).
//
// Otherwise the request goes to the application, and a GET's response fills
// the entry as it streams to the client (the tap). With `lock` (the
// default), one request fills a key at a time: the others that miss it
// wait for that fill, up to lock_timeout, then are answered from the entry
// it made ("fwd=uri-miss; collapsed"), or go to the application themselves
// if it made none or took too long. A response is stored when
// cache/freshness.h allows, complete, and its file could be written (a
// full disk loses the entry, never the response: a log line says why). A
// response with Vary is stored under its key and the request's values of
// the fields it names, with a marker under the key alone that names them.
//
// Every response of a cached location carries Cache-Status (RFC 9211):
// "tern; hit; ttl=N", "tern; fwd=uri-miss", "tern; fwd=vary-miss",
// "tern; fwd=stale", "tern; fwd=request" (an entry the request's
// Authorization may not use), "tern; fwd=method".
//
// Built with its location's handler; shares the zone with every other
// user. Its start() runs on a loop thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "cache/freshness.h"
#include "cache/zone.h"
#include "server/config/cache_config.h"
#include "server/handlers/variable_text.h"
#include "upstream/call.h"

namespace tern::server {

class CacheZones;
class Metrics;
struct Route;

class UpstreamCache {
 public:
  // `zone` and `metrics` (null: not counted) outlive it.
  UpstreamCache(cache::Zone* zone, const CacheUseConfig& config, Metrics* metrics);

  // What answer() found, for fetch().
  struct Miss {
    std::string key;
    const char* status = "tern; fwd=uri-miss";  // the response's Cache-Status
    bool fill = false;                          // a GET: its response may fill the entry
  };
  // Starts the call to the application for `exchange`, with `tap` (null:
  // the response fills nothing) and `status` as its Cache-Status. May run
  // after fetch() returned (a request that waited), on the exchange's loop;
  // everything it needs of the route it holds.
  using Fetch = std::function<void(http::Exchange&, std::unique_ptr<upstream::ResponseTap> tap,
                                   std::string_view status)>;

  // Answers the exchange from the zone (true: finished), or says in *miss
  // what fetch() needs.
  bool answer(const Route& route, http::Exchange& exchange, Miss* miss) const;
  // Goes to the application for a miss: at once, or after the fill under
  // way for its key (see above).
  void fetch(http::Exchange& exchange, Miss miss, Fetch fetch) const;

 private:
  struct Wait;

  bool answer_key(http::Exchange& exchange, Miss* miss, const char* collapsed) const;
  // `collapsed`: the Cache-Status of a request that waited for the fill.
  void serve(const cache::Stored& entry, int64_t now, http::Exchange& exchange, const char* collapsed) const;

  cache::Zone* const zone_;
  const VariableText key_;
  const cache::Policy policy_;
  const bool lock_;
  const std::chrono::milliseconds lock_timeout_;
  Metrics* const metrics_;
};

// The cache of a location's `use`, on its zone among `zones`. Throws
// std::runtime_error when there is no such zone (a reload named one that
// only a restart makes).
std::unique_ptr<UpstreamCache> make_upstream_cache(const CacheZones* zones, const CacheUseConfig& use,
                                                   Metrics* metrics);

}  // namespace tern::server
