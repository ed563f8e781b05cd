// The cache side of Config: [[cache]] zones, and a proxy's or a FastCGI
// block's use of one (`cache = "pages"` or a table).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "server/ip_filter.h"

namespace tern::server {

// One [[cache]]: a directory of stored responses and its index in memory
// (cache/zone.h), shared by every worker. Only a restart makes or changes
// one.
struct CacheZoneConfig {
  std::string name;
  std::string path;                       // an absolute directory, made if missing
  uint64_t max_size = uint64_t{1} << 30;  // of the files
  uint64_t memory = uint64_t{32} << 20;   // of the index, heads and small bodies
  std::chrono::milliseconds inactive{600'000};  // unused this long: removed
  std::string file;  // the file it was read from
  int line = 0;
  bool operator==(const CacheZoneConfig&) const = default;
};

// A location's use of a zone.
struct CacheUseConfig {
  std::string zone;
  // What tells responses apart (server/handlers/variable_text.h).
  std::string key = "$scheme$host$request_uri";
  // Lifetime of a response that gives none, by status (0: any status);
  // listing a status also makes it storable (cache/freshness.h).
  std::vector<std::pair<int, std::chrono::seconds>> valid;
  // Store responses with Set-Cookie (without the field).
  bool store_set_cookie = false;
  // One request fills a missing key while the others wait for it, up to
  // lock_timeout (then they go to the application themselves). A fill
  // under way for lock_age is taken over by the next request that misses
  // the key (its filler may be stuck), as nginx's proxy_cache_lock_age.
  bool lock = true;
  std::chrono::milliseconds lock_timeout{5000};
  std::chrono::milliseconds lock_age{5000};
  // A stale entry with a validator (ETag, Last-Modified) is asked for
  // with If-None-Match or If-Modified-Since; a 304 makes it fresh again
  // (nginx's proxy_cache_revalidate, on here by default).
  bool revalidate = true;
  // The request that finds a stale entry it may be answered from while the
  // entry is refreshed (use_stale "updating", or the response's
  // stale-while-revalidate) is answered from it at once, and the refresh
  // goes on without it (nginx's proxy_cache_background_update, on here by
  // default); false: that request waits for the application, as nginx's
  // default. Only with `lock`, which makes one refresh at a time.
  bool background_update = true;
  // When a stored response, however stale, answers in place of the
  // application's (nginx's proxy_cache_use_stale; none by default, but a
  // response's own stale-if-error is honoured for errors, timeouts and
  // 500, 502, 503, 504): "error" (no connection, a broken response),
  // "timeout", a status the application answered, and "updating" (while
  // another request refreshes the entry, rather than waiting for it).
  struct UseStale {
    bool error = false;
    bool timeout = false;
    bool updating = false;
    std::vector<int> statuses;
    bool operator==(const UseStale&) const = default;
  };
  UseStale use_stale;
  // Conditions, each a text with the request's variables ("$cookie_nocache",
  // "$arg_nocache", "$http_pragma"): when one of `bypass` is neither empty
  // nor "0", the request is not answered from the cache (its response may
  // still be stored); when one of `no_store` is, its response is not stored
  // (nginx's proxy_cache_bypass and proxy_no_cache).
  std::vector<std::string> bypass;
  std::vector<std::string> no_store;
  // Networks from which a PURGE request removes the entries of the key it
  // makes (or, for a target ending in '*', of every key that begins with
  // what precedes the '*'); none: PURGE goes to the application as any
  // other method.
  std::vector<Cidr> purge;
  int line = 0;
  bool operator==(const CacheUseConfig&) const = default;
};

}  // namespace tern::server
