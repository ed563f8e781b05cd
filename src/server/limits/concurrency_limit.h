// ConcurrencyLimit: one [[limit]] with `connections`, nginx's limit_conn:
// at most that many at once per key (the connections an address holds
// open, or the requests in flight for a key). acquire() takes a place if
// one is free; the holder gives it back with release() for the same key.
//
//   ConcurrencyLimit per_ip({.connections = 20});
//   if (!per_ip.acquire(ip)) -> refuse (503 or close)
//   ... when it ends: per_ip.release(ip);
//
// One table for every worker (KeyTable). A key whose count is back to 0
// leaves the table, so only keys holding places fill it; `size` should
// exceed how many can hold places at once (a key pushed out while in use
// starts again from 0, and its releases find nothing). Any thread.
#pragma once

#include <cstdint>
#include <string_view>

#include "server/limits/key_table.h"

namespace tern::server {

struct ConcurrencyLimitOptions {
  uint32_t connections = 1;  // places per key
  size_t size = 100'000;     // keys kept
};

class ConcurrencyLimit {
 public:
  explicit ConcurrencyLimit(const ConcurrencyLimitOptions& options) : options_(options), table_(options.size) {}

  // Takes a place for `key`; false when its `connections` are all taken.
  bool acquire(std::string_view key) { return acquire_hash(table_.hash(key)); }
  // Gives back a place acquire() took for `key`.
  void release(std::string_view key) { release_hash(table_.hash(key)); }

  // The same by a hash of this table's (hash()), for a holder that keeps
  // the hash instead of the key.
  uint64_t hash(std::string_view key) const { return table_.hash(key); }
  bool acquire_hash(uint64_t hash) {
    return table_.with(hash, [this](uint32_t& held, bool) {
      if (held >= options_.connections) return false;
      ++held;
      return true;
    });
  }
  void release_hash(uint64_t hash) {
    table_.if_present(hash, [](uint32_t& held) { held -= held > 0 ? 1 : 0; },
                      [](const uint32_t& held) { return held > 0; });
  }

  const ConcurrencyLimitOptions& options() const { return options_; }
  size_t keys() const { return table_.size(); }

 private:
  const ConcurrencyLimitOptions options_;
  KeyTable<uint32_t> table_;
};

}  // namespace tern::server
