// KeyTable<V>: a bounded map from a key to a V, shared by every worker: the
// state of a [[limit]] (a leaky bucket per client, a count of connections
// per address). Split in shards, each under its own mutex, so that workers
// limiting different keys rarely meet; within a shard the least recently
// used key gives way when it is full. Every node is made at construction:
// nothing is allocated afterwards, whatever the keys.
//
// Keys are kept by a keyed 64-bit hash (SipHash, libsodium's
// crypto_shorthash, with a random key per table): a client cannot choose
// keys that collide with another's, and two keys meeting by chance is a
// 2^-64 event per pair.
//
//   KeyTable<Bucket> table(100'000);
//   bool ok = table.with(table.hash(key), [&](Bucket& b, bool fresh) { ... });
//
// Any thread. `f` runs under the shard's lock: it must be short and call
// nothing that locks.
#pragma once

#include <sodium.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace tern::server {

template <typename V>
class KeyTable {
 public:
  // Room for at least `capacity` keys, in up to `shards` shards.
  explicit KeyTable(size_t capacity, size_t shards = 64) {
    if (sodium_init() < 0) throw std::runtime_error("libsodium could not start");
    crypto_shorthash_keygen(key_);
    if (capacity == 0) capacity = 1;
    if (shards > capacity) shards = capacity;
    per_shard_ = static_cast<uint32_t>((capacity + shards - 1) / shards);
    size_t buckets = 1;
    while (buckets < per_shard_) buckets <<= 1;
    shards_ = std::make_unique<Shard[]>(shards);
    shard_count_ = shards;
    for (size_t i = 0; i < shards; ++i) {
      Shard& s = shards_[i];
      s.nodes.resize(per_shard_);
      s.buckets.assign(buckets, kNone);
      for (uint32_t n = 0; n < per_shard_; ++n) s.nodes[n].next = n + 1 < per_shard_ ? n + 1 : kNone;
      s.free = 0;
    }
  }
  KeyTable(const KeyTable&) = delete;
  KeyTable& operator=(const KeyTable&) = delete;

  uint64_t hash(std::string_view key) const {
    uint64_t out = 0;
    crypto_shorthash(reinterpret_cast<unsigned char*>(&out), reinterpret_cast<const unsigned char*>(key.data()),
                     key.size(), key_);
    return out;
  }

  // f(V& value, bool fresh) on the key's entry, made (value-initialized,
  // fresh = true) if absent, the shard's least recently used key giving
  // way when it is full. Returns what f returns.
  template <typename F>
  auto with(uint64_t hash, F f) {
    Shard& s = shard(hash);
    std::lock_guard lock(s.mu);
    uint32_t n = find(s, hash);
    bool fresh = false;
    if (n == kNone) {
      n = make(s, hash);
      fresh = true;
    } else {
      touch(s, n);
    }
    return f(s.nodes[n].value, fresh);
  }

  // f(V& value) on the key's entry if there is one; whether there was.
  // `keep(value)` false afterwards takes the key out.
  template <typename F, typename Keep>
  bool if_present(uint64_t hash, F f, Keep keep) {
    Shard& s = shard(hash);
    std::lock_guard lock(s.mu);
    const uint32_t n = find(s, hash);
    if (n == kNone) return false;
    f(s.nodes[n].value);
    if (!keep(s.nodes[n].value)) remove(s, n);
    return true;
  }

  // Keys held now (each shard locked in turn).
  size_t size() const {
    size_t total = 0;
    for (size_t i = 0; i < shard_count_; ++i) {
      std::lock_guard lock(shards_[i].mu);
      total += shards_[i].used;
    }
    return total;
  }
  size_t capacity() const { return per_shard_ * shard_count_; }

 private:
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

  struct Node {
    uint64_t hash = 0;
    uint32_t next = kNone;  // in its bucket's chain, or in the free list
    uint32_t newer = kNone;
    uint32_t older = kNone;
    V value{};
  };
  struct alignas(64) Shard {
    mutable std::mutex mu;
    std::vector<Node> nodes;
    std::vector<uint32_t> buckets;  // chain heads
    uint32_t newest = kNone;
    uint32_t oldest = kNone;
    uint32_t free = kNone;
    uint32_t used = 0;
  };

  // The shard by the high bits, the bucket by the low ones.
  Shard& shard(uint64_t hash) { return shards_[(hash >> 32) % shard_count_]; }
  static uint32_t& bucket(Shard& s, uint64_t hash) { return s.buckets[hash & (s.buckets.size() - 1)]; }

  static uint32_t find(Shard& s, uint64_t hash) {
    for (uint32_t n = bucket(s, hash); n != kNone; n = s.nodes[n].next) {
      if (s.nodes[n].hash == hash) return n;
    }
    return kNone;
  }

  static void unlink_age(Shard& s, uint32_t n) {
    Node& node = s.nodes[n];
    (node.newer != kNone ? s.nodes[node.newer].older : s.newest) = node.older;
    (node.older != kNone ? s.nodes[node.older].newer : s.oldest) = node.newer;
    node.newer = node.older = kNone;
  }
  static void link_newest(Shard& s, uint32_t n) {
    Node& node = s.nodes[n];
    node.older = s.newest;
    node.newer = kNone;
    if (s.newest != kNone) s.nodes[s.newest].newer = n;
    s.newest = n;
    if (s.oldest == kNone) s.oldest = n;
  }
  static void touch(Shard& s, uint32_t n) {
    if (s.newest == n) return;
    unlink_age(s, n);
    link_newest(s, n);
  }

  static void remove(Shard& s, uint32_t n) {
    Node& node = s.nodes[n];
    for (uint32_t* link = &bucket(s, node.hash); *link != kNone; link = &s.nodes[*link].next) {
      if (*link == n) {
        *link = node.next;
        break;
      }
    }
    unlink_age(s, n);
    node.next = s.free;
    s.free = n;
    --s.used;
  }

  static uint32_t make(Shard& s, uint64_t hash) {
    if (s.free == kNone) remove(s, s.oldest);
    const uint32_t n = s.free;
    Node& node = s.nodes[n];
    s.free = node.next;
    node.hash = hash;
    node.value = V{};
    node.next = bucket(s, hash);
    bucket(s, hash) = n;
    link_newest(s, n);
    ++s.used;
    return n;
  }

  unsigned char key_[crypto_shorthash_KEYBYTES];
  std::unique_ptr<Shard[]> shards_;
  size_t shard_count_ = 0;
  uint32_t per_shard_ = 0;
};

}  // namespace tern::server
