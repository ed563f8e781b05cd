// Zone: one cache of responses ([[cache]] in the configuration), its
// entries in files under its directory (cache/entry_file.h) and its index in
// memory, shared by every loop of the server.
//
//   Zone zone({.name = "pages", .path = "/var/cache/tern/pages", .max_size = 10 << 30, .memory = 64 << 20});
//   zone.load();                                   // at start, on a task thread
//   if (auto hit = zone.find(KeyHash::of(key), now)) serve(*hit);
//   zone.insert(writer, stored, now);              // a fill's EntryWriter, its last byte written
//
// The index holds a small node for every entry on disk: its hash, its
// file's size, when it was last used. An entry in use also has its head
// read (a Stored), and a small body kept beside it, so that a popular page
// is served without reading its file's head again. Both are bounded:
//   - max_size: the files' bytes; beyond it the least recently used entries
//     are removed, file and node;
//   - memory: the nodes, heads and bodies in memory; beyond it the least
//     recently used heads and bodies are let go first (read again from the
//     file at the next use), and only when the nodes alone fill it are
//     entries removed, as nginx does when its keys_zone is full.
// Entries not used for `inactive` are removed too (expire_inactive()).
//
// Fills: begin_fill() makes the first to miss a key its filler; those who
// miss it meanwhile leave a wake-up, run (on the filler's thread) by
// end_fill(), when the entry is there, the response turned out not to be
// kept, or the fill failed (then one of them fills next): a cold popular
// key costs the origin one request, not one per waiting client.
//
// Sharded by hash, a mutex each, held for a moment: a lookup from any loop
// thread copies out a shared pointer, so an entry being served survives its
// eviction (an open file outlives its name). Files are read by the thread
// that asks, outside the lock; an entry's file gets its name and loses it
// under its shard's lock, so the index and the directory agree. Owned by
// the server; outlives its loops.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/entry_file.h"

namespace tern::cache {

struct ZoneOptions {
  std::string name;
  std::string path;                         // the directory of the entries
  uint64_t max_size = uint64_t{1} << 30;    // of the files
  uint64_t memory = uint64_t{64} << 20;     // of the index, heads and bodies in memory
  std::chrono::seconds inactive{600};       // unused this long: removed (nginx's 10m)
  uint64_t memory_body_max = 16 * 1024;     // bodies up to this size are kept with their head
};

// An entry read back: its head and, when small, its body.
struct Stored {
  KeyHash hash;
  EntryHead head;
  std::string path;  // of its file
  uint64_t inode = 0;  // of its file: a file under its name now may be a later entry's
  std::string body;  // the body, when body_in_memory
  bool body_in_memory = false;
  // When it was indexed among the zone's inserts (0: read back at start):
  // what a purge compares. Set by the zone.
  uint64_t sequence = 0;

  size_t memory() const;
};

class Zone {
 public:
  explicit Zone(ZoneOptions options);
  Zone(const Zone&) = delete;
  Zone& operator=(const Zone&) = delete;

  const ZoneOptions& options() const { return options_; }

  // Reads the directory into the index: every complete entry (its file's
  // time as its last use), temp files of fills that never finished and
  // files that are not entries removed. Lookups may run meanwhile: a key
  // not read yet is a miss. Returns the entries indexed.
  size_t load();

  // The entry of `hash`, marked used (null: none, or it was purged, or its
  // file was found broken or gone, and the node removed). Reads its head (and a small
  // body) from its file when only its node was in memory.
  std::shared_ptr<const Stored> find(const KeyHash& hash, int64_t now);

  // How many entries have been indexed so far: an entry whose sequence is
  // above a count taken earlier was stored since.
  uint64_t inserts() const { return inserts_.load(std::memory_order_relaxed); }

  // Finishes the writer's file, gives it its name and indexes it as
  // `stored` (in place of an entry under the same hash); then removes the
  // least recently used while the zone is beyond its bounds. An error: the
  // file could not be finished (a full disk), and nothing changed. Sets
  // the file's inode and where its body begins in *stored.
  Result<void> insert(EntryWriter& writer, std::shared_ptr<Stored> stored, int64_t now);

  // How a fill ended, for those who waited for it.
  enum class FillEnd {
    // The entry is stored, or the response may not be or could not be
    // (those waiting go to the origin at once, not one after another).
    kSettled,
    // No response to store: the origin failed (no connection, a timeout,
    // a response cut short, a server error not kept). One of those waiting
    // fills again, the others wait on (nginx's proxy_cache_lock).
    kFailed,
  };
  using FillWake = std::function<void(FillEnd)>;
  // Whether the caller fills `hash` (true; *id then names the fill for
  // end_fill()), or another fill is under way and `wake` will run when it
  // ends (false; *id then names the wake-up for leave_fill()). A fill under
  // way for `age` or longer since its last filler began (that one may be
  // stuck: nginx's proxy_cache_lock_age) is taken over: the caller fills
  // it too. Its waiters are woken by the first of its fillers to settle it
  // (see FillEnd), or by the last to fail. Any thread.
  bool begin_fill(const KeyHash& hash, FillWake wake, std::chrono::milliseconds age, uint64_t* id);
  // A waiter stops waiting (its lock_timeout ran out): its wake-up goes,
  // with what it holds.
  void leave_fill(const KeyHash& hash, uint64_t waiter);
  // A filler of the fill `ticket` of `hash` ended: runs its wake-ups with
  // `end`, unless it failed while another filler goes on. A fill already
  // woken (by another of its fillers) is left as it is.
  void end_fill(const KeyHash& hash, uint64_t ticket, FillEnd end);

  // Removes an entry and its file (a purge, a broken file). False: none.
  bool erase(const KeyHash& hash);
  // Removes the entry `gone` was read from, node and file, if it is still
  // the one under its hash (not a later fill's): a file removed from under
  // the zone, a revalidated response that may not be kept.
  void forget(const Stored& gone);
  // Whether `entry` is still the zone's entry under its hash: not purged,
  // removed, evicted or filled again since it was read. Any thread.
  bool holds(const Stored& entry) const;

  // Purges every entry indexed so far whose key is `key`, or starts with it
  // (`prefix`): each is a miss from now on (is_purged(), which a lookup
  // asks), and is removed at its next use or by sweep_purges(). Any thread.
  void purge(std::string key, bool prefix);
  bool is_purged(const Stored& entry) const;
  // Reads the head of every entry while purges wait, removes those they
  // name, and forgets them. Returns how many went. The manager's thread.
  size_t sweep_purges();

  // Removes the entries not used since now - inactive. Returns how many.
  size_t expire_inactive(int64_t now);

  struct Counts {
    uint64_t entries = 0;
    uint64_t disk_bytes = 0;
    uint64_t memory_bytes = 0;
  };
  Counts counts() const;

  // Reads an entry's file: its head, and its body if small enough. Null
  // on failure, with *broken set when the file is gone or not an entry
  // (not when, say, the process is out of descriptors).
  static std::shared_ptr<Stored> read(const std::string& path, const KeyHash& hash, uint64_t memory_body_max,
                                      bool* broken = nullptr);

 private:
  struct Node;
  using Order = std::list<Node*>;  // most recent first
  struct Node {
    KeyHash hash;
    uint64_t file_size = 0;
    int64_t last_use = 0;
    uint64_t generation = 0;  // the zone's count of inserts at its own (0: read back at start)
    std::shared_ptr<const Stored> loaded;
    Order::iterator use;
    Order::iterator load;  // in Shard::loaded while `loaded` is set
  };
  struct Fill {
    uint64_t ticket = 0;
    std::chrono::steady_clock::time_point began;  // by its latest filler
    unsigned fillers = 1;                          // more when taken over
    std::vector<std::pair<uint64_t, FillWake>> waiting;
  };
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<KeyHash, Node, KeyHashHasher> nodes;
    Order used;
    Order loaded;
    // Keys being filled, and who waits for each.
    std::unordered_map<KeyHash, Fill, KeyHashHasher> fills;
  };
  static constexpr size_t kShards = 16;
  // What a node takes beside its Stored: the node, its map entry, its
  // place in the orders.
  static constexpr size_t kNodeMemory = sizeof(Node) + 96;

  Shard& shard(const KeyHash& hash) { return shards_[hash.bytes[0] % kShards]; }
  // With the shard's lock held.
  void set_loaded(Shard& s, Node& node, std::shared_ptr<const Stored> stored);
  void remove(Shard& s, Node& node);  // the node; its file is the caller's
  // Lets go of what the zone is beyond its bounds, oldest first.
  void shrink();
  // Removes the least recently used entry of the zone (true), or lets go
  // of its least recently used head and body (`loaded_only`).
  bool evict_oldest(bool loaded_only);

  struct Purge {
    std::string key;
    bool prefix = false;
    uint64_t upto = 0;  // entries of this sequence or before
  };

  const ZoneOptions options_;
  Shard shards_[kShards];
  std::atomic<uint64_t> inserts_{0};
  std::atomic<uint64_t> fill_ids_{0};  // fills' tickets and waiters' wake-ups
  mutable std::mutex purges_mu_;
  std::vector<Purge> purges_;
  std::atomic<bool> purging_{false};  // purges_ is not empty
  std::atomic<uint64_t> entries_{0};
  std::atomic<uint64_t> disk_bytes_{0};
  std::atomic<uint64_t> memory_bytes_{0};
};

}  // namespace tern::cache
