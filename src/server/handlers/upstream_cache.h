// UpstreamCache: a location's [[cache]] in front of its application (a
// proxy or a FastCGI block), as nginx's proxy_cache and fastcgi_cache.
//
//   if (cache->start(route, exchange, &options, &tap)) return;  // answered from the zone
//   Call::start<Codec>(exchange, group, options, std::move(tap), ...);
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
// the entry as it streams to the client (the tap): stored when
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

  // Answers the exchange from the zone (true: finished), or prepares the
  // call to the application: *tap fills the entry, options carry the
  // Cache-Status.
  bool start(const Route& route, http::Exchange& exchange, upstream::CallOptions* options,
             std::unique_ptr<upstream::ResponseTap>* tap) const;

 private:
  void serve(const cache::Stored& entry, int64_t now, http::Exchange& exchange) const;

  cache::Zone* const zone_;
  const VariableText key_;
  const cache::Policy policy_;
  Metrics* const metrics_;
};

// The cache of a location's `use`, on its zone among `zones`. Throws
// std::runtime_error when there is no such zone (a reload named one that
// only a restart makes).
std::unique_ptr<UpstreamCache> make_upstream_cache(const CacheZones* zones, const CacheUseConfig& use,
                                                   Metrics* metrics);

}  // namespace tern::server
