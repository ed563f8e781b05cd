// ResponseCache: GET/HEAD responses of a slow application kept in memory, so
// a page that costs PHP 20 ms is served again at static-file speed.
//
// Keyed by host and request-target (GET and HEAD share an entry; HEAD is
// served from one but never fills one). A response is cached only when it
// is a 200 or 301, carries no Set-Cookie and no Vary, is not marked
// no-store, no-cache or private, and has a lifetime: Cache-Control s-maxage
// or max-age, else the configured default (0: none). Bounded in bytes, least
// recently used out first; an entry above an eighth of the budget is not
// kept.
//
// One per [[fastcgi]] block, shared by every loop: lookups take a mutex for
// a moment and hand out a shared pointer, so an entry being served survives
// its eviction.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "upstream/call.h"
#include "http/request.h"

namespace tern::server {

struct CachedResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::chrono::steady_clock::time_point stored;
  std::chrono::steady_clock::time_point expires;
  size_t bytes() const;
};

class ResponseCache {
 public:
  ResponseCache(size_t max_bytes, std::chrono::milliseconds default_ttl);

  static std::string key(const http::Request& request);
  // A fresh entry, or null.
  std::shared_ptr<const CachedResponse> find(const std::string& key,
                                             std::chrono::steady_clock::time_point now);
  void insert(const std::string& key, std::shared_ptr<const CachedResponse> entry);

  // How long a response may be kept; nullopt: not at all.
  std::optional<std::chrono::milliseconds> lifetime(int status,
                                                    std::span<const http::Header> headers) const;
  size_t max_entry_bytes() const { return max_bytes_ / 8; }
  size_t bytes() const;
  size_t entries() const;

  // A tap for upstream::Call that fills the entry for `key` as the response
  // streams past, and stores it if the response completes and qualifies.
  std::unique_ptr<upstream::ResponseTap> filler(std::string key);

 private:
  using Lru = std::list<std::pair<std::string, std::shared_ptr<const CachedResponse>>>;

  void erase(Lru::iterator it);

  const size_t max_bytes_;
  const std::chrono::milliseconds default_ttl_;
  mutable std::mutex mu_;
  Lru lru_;  // most recently used first
  std::unordered_map<std::string_view, Lru::iterator> index_;  // views into lru_ keys
  size_t bytes_ = 0;
};

}  // namespace tern::server
