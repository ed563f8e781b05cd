// ConcurrencyLimit: one [[limit]] with `connections`, nginx's limit_conn:
// at most that many at once per key (the connections an address holds
// open, or the requests in flight for a key). acquire() takes a place if
// one is free; the holder gives it back with release() for the same key.
//
//   ConcurrencyLimit per_ip({.connections = 20});
//   if (!per_ip.acquire(ip, now_s).allowed) -> refuse (close, or 429)
//   ... when it ends: per_ip.release(ip);
//
// One table for every worker (KeyTable). A key whose count is back to 0
// leaves the table, so only keys holding places fill it; `size` should
// exceed how many can hold places at once (a key pushed out while in use
// starts again from 0, and its releases find nothing). Any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>

#include "server/limits/key_table.h"

namespace tern::server {

struct ConcurrencyLimitOptions {
  uint32_t connections = 1;  // places per key
  size_t size = 100'000;     // keys kept
};

class ConcurrencyLimit {
 public:
  // A new table; or, with `previous` of the same `size`, that one's keys
  // and counts (a reload that keeps a limit keeps the places held).
  explicit ConcurrencyLimit(const ConcurrencyLimitOptions& options, const ConcurrencyLimit* previous = nullptr)
      : options_(options),
        state_(previous != nullptr && previous->options_.size == options.size ? previous->state_
                                                                              : std::make_shared<State>(options.size)) {}

  struct Verdict {
    bool allowed = true;
    // Refused, and the first refusal of this key in this second (by
    // `now_s`): worth a log line.
    bool first_this_second = false;
  };
  // Takes a place for `key`, refused when its `connections` are all taken.
  Verdict acquire(std::string_view key, int64_t now_s) { return acquire_hash(hash(key), now_s); }
  // Gives back a place acquire() took for `key`.
  void release(std::string_view key) { release_hash(hash(key)); }

  // The same by a hash of this table's (hash()), for a holder that keeps
  // the hash instead of the key.
  uint64_t hash(std::string_view key) const { return state_->table.hash(key); }
  Verdict acquire_hash(uint64_t hash, int64_t now_s) {
    const Verdict verdict = state_->table.with(hash, [this, now_s](Places& places, bool) {
      Verdict v;
      if (places.held < options_.connections) {
        ++places.held;
        return v;
      }
      v.allowed = false;
      v.first_this_second = places.logged != now_s;
      places.logged = now_s;
      return v;
    });
    if (!verdict.allowed) state_->refused.fetch_add(1, std::memory_order_relaxed);
    return verdict;
  }
  void release_hash(uint64_t hash) {
    state_->table.if_present(hash, [](Places& places) { places.held -= places.held > 0 ? 1 : 0; },
                             [](const Places& places) { return places.held > 0; });
  }

  const ConcurrencyLimitOptions& options() const { return options_; }
  size_t keys() const { return state_->table.size(); }
  uint64_t refused() const { return state_->refused.load(std::memory_order_relaxed); }

 private:
  struct Places {
    uint32_t held = 0;
    int64_t logged = -1;  // the second a refusal was last logged
  };
  struct State {
    explicit State(size_t size) : table(size) {}
    KeyTable<Places> table;
    std::atomic<uint64_t> refused{0};
  };

  const ConcurrencyLimitOptions options_;
  std::shared_ptr<State> state_;
};

}  // namespace tern::server
