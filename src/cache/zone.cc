#include "cache/zone.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <utility>
#include <vector>

namespace tern::cache {
namespace {

// Closes a descriptor when it goes.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// The names in a directory (without "." and "..").
std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> out;
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return out;
  while (const dirent* e = ::readdir(dir)) {
    const std::string_view name = e->d_name;
    if (name != "." && name != "..") out.emplace_back(name);
  }
  ::closedir(dir);
  return out;
}

}  // namespace

size_t Stored::memory() const {
  size_t bytes = sizeof(Stored) + path.size() + head.key.size() + head.variant.size() + body.size();
  for (const std::string& name : head.vary) bytes += sizeof name + name.size();
  for (const auto& [name, value] : head.fields) bytes += sizeof name + sizeof value + name.size() + value.size();
  return bytes;
}

Zone::Zone(ZoneOptions options) : options_(std::move(options)) {}

std::shared_ptr<Stored> Zone::read(const std::string& path, const KeyHash& hash, uint64_t memory_body_max,
                                   bool* broken) {
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) {
    if (broken != nullptr) *broken = errno == ENOENT;
    return nullptr;
  }
  uint64_t inode = 0;
  Result<EntryHead> head = read_entry_head(file.fd, &inode);
  if (!head) {
    if (broken != nullptr) *broken = head.error().code == EINVAL;
    return nullptr;
  }
  auto stored = std::make_shared<Stored>();
  stored->inode = inode;
  stored->hash = hash;
  stored->head = std::move(*head);
  stored->path = path;
  if (stored->head.body_size <= memory_body_max) {
    stored->body.resize(stored->head.body_size);
    size_t done = 0;
    while (done < stored->body.size()) {
      const ssize_t n = ::pread(file.fd, stored->body.data() + done, stored->body.size() - done,
                                static_cast<off_t>(stored->head.body_offset + done));
      if (n <= 0) return nullptr;
      done += static_cast<size_t>(n);
    }
    stored->body_in_memory = true;
  }
  return stored;
}

size_t Zone::load() {
  struct Found {
    KeyHash hash;
    uint64_t size;
    int64_t mtime;
  };
  std::vector<Found> found;
  // Loops fill while this reads: their temp files carry our tag.
  const std::string& own_temp = own_temp_tag();
  for (const std::string& first : list_dir(options_.path)) {
    const std::string level1 = options_.path + "/" + first;
    for (const std::string& second : list_dir(level1)) {
      const std::string level2 = level1 + "/" + second;
      for (const std::string& name : list_dir(level2)) {
        const std::string path = level2 + "/" + name;
        KeyHash hash;
        if (name.find(own_temp) != std::string::npos) continue;  // a fill of ours, under way
        if (is_temp_name(name) || !KeyHash::from_hex(name, &hash) || name.compare(0, 2, first) != 0 ||
            name.compare(2, 2, second) != 0) {
          ::unlink(path.c_str());  // a fill that never finished, or not ours to keep
          continue;
        }
        Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
        struct stat st;
        if (file.fd < 0 || ::fstat(file.fd, &st) != 0) continue;
        if (!read_entry_head(file.fd)) {
          ::unlink(path.c_str());
          continue;
        }
        found.push_back({hash, static_cast<uint64_t>(st.st_size), st.st_mtime});
      }
    }
  }
  // Most recent first, each behind what was filled while loading. Each has
  // a whole `inactive` from now to be used again, as in nginx; the files'
  // times only order them.
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.mtime > b.mtime; });
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  size_t indexed = 0;
  for (const Found& f : found) {
    Shard& s = shard(f.hash);
    std::lock_guard lock(s.mu);
    auto [it, made] = s.nodes.try_emplace(f.hash);
    if (!made) continue;  // filled while loading: the newer one
    Node& node = it->second;
    node.hash = f.hash;
    node.file_size = f.size;
    node.last_use = now;
    node.use = s.used.insert(s.used.end(), &node);
    node.load = s.loaded.end();
    entries_.fetch_add(1, std::memory_order_relaxed);
    disk_bytes_.fetch_add(f.size, std::memory_order_relaxed);
    memory_bytes_.fetch_add(kNodeMemory, std::memory_order_relaxed);
    ++indexed;
  }
  shrink();
  return indexed;
}

std::shared_ptr<const Stored> Zone::find(const KeyHash& hash, int64_t now) {
  Shard& s = shard(hash);
  uint64_t generation = 0;
  {
    std::lock_guard lock(s.mu);
    auto it = s.nodes.find(hash);
    if (it == s.nodes.end()) return nullptr;
    Node& node = it->second;
    generation = node.generation;
    node.last_use = now;
    s.used.splice(s.used.begin(), s.used, node.use);
    if (node.loaded) {
      if (is_purged(*node.loaded)) {
        remove(s, node);
        ::unlink(entry_path(options_.path, hash).c_str());
        return nullptr;
      }
      s.loaded.splice(s.loaded.begin(), s.loaded, node.load);
      return node.loaded;
    }
  }
  // Only its node: read the file outside the lock.
  const std::string path = entry_path(options_.path, hash);
  bool broken = false;
  std::shared_ptr<Stored> stored = read(path, hash, options_.memory_body_max, &broken);
  if (stored) stored->sequence = generation;
  {
    std::lock_guard lock(s.mu);
    auto it = s.nodes.find(hash);
    // Another entry may have taken the name meanwhile: that one stays.
    const bool same = it != s.nodes.end() && it->second.generation == generation;
    if (stored && is_purged(*stored)) {
      stored = nullptr;
      broken = true;  // as good as gone
    }
    if (!stored) {
      if (broken && same) {
        remove(s, it->second);  // gone or not an entry: its node goes too
        ::unlink(path.c_str());
      }
      return nullptr;  // out of descriptors, say: a miss, the entry stays
    }
    // Removed (evicted, purged) or filled again while its file was read:
    // what was read may be neither, so it is a miss.
    if (!same) return nullptr;
    if (!it->second.loaded) set_loaded(s, it->second, stored);
  }
  shrink();
  return stored;
}

void Zone::set_loaded(Shard& s, Node& node, std::shared_ptr<const Stored> stored) {
  if (node.loaded) {
    memory_bytes_.fetch_sub(node.loaded->memory(), std::memory_order_relaxed);
    s.loaded.erase(node.load);
    node.load = s.loaded.end();
  }
  node.loaded = std::move(stored);
  if (node.loaded) {
    memory_bytes_.fetch_add(node.loaded->memory(), std::memory_order_relaxed);
    node.load = s.loaded.insert(s.loaded.begin(), &node);
  }
}

void Zone::remove(Shard& s, Node& node) {
  set_loaded(s, node, nullptr);
  s.used.erase(node.use);
  entries_.fetch_sub(1, std::memory_order_relaxed);
  disk_bytes_.fetch_sub(node.file_size, std::memory_order_relaxed);
  memory_bytes_.fetch_sub(kNodeMemory, std::memory_order_relaxed);
  s.nodes.erase(node.hash);
}

Result<void> Zone::insert(EntryWriter& writer, std::shared_ptr<Stored> stored, int64_t now) {
  Result<uint64_t> file_size = writer.finish();
  if (!file_size) return file_size.error();
  stored->inode = writer.inode();
  stored->head.body_offset = writer.head_size();
  Shard& s = shard(stored->hash);
  {
    std::lock_guard lock(s.mu);
    if (Result<void> published = writer.publish(); !published) return published;
    auto [it, made] = s.nodes.try_emplace(stored->hash);
    Node& node = it->second;
    if (made) {
      node.hash = stored->hash;
      node.use = s.used.insert(s.used.begin(), &node);
      node.load = s.loaded.end();
      entries_.fetch_add(1, std::memory_order_relaxed);
      memory_bytes_.fetch_add(kNodeMemory, std::memory_order_relaxed);
    } else {
      s.used.splice(s.used.begin(), s.used, node.use);
      disk_bytes_.fetch_sub(node.file_size, std::memory_order_relaxed);
    }
    node.file_size = *file_size;
    node.last_use = now;
    node.generation = inserts_.fetch_add(1, std::memory_order_relaxed) + 1;
    stored->sequence = node.generation;
    disk_bytes_.fetch_add(*file_size, std::memory_order_relaxed);
    set_loaded(s, node, std::move(stored));
  }
  shrink();
  return {};
}

bool Zone::begin_fill(const KeyHash& hash, FillWake wake, std::chrono::milliseconds age, uint64_t* id) {
  const auto now = std::chrono::steady_clock::now();
  Shard& s = shard(hash);
  std::lock_guard lock(s.mu);
  auto [it, first] = s.fills.try_emplace(hash);
  Fill& fill = it->second;
  if (first) fill.ticket = fill_ids_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (first || now - fill.began >= age) {
    if (!first) ++fill.fillers;
    fill.began = now;
    *id = fill.ticket;
    return true;
  }
  *id = fill_ids_.fetch_add(1, std::memory_order_relaxed) + 1;
  fill.waiting.emplace_back(*id, std::move(wake));
  return false;
}

void Zone::leave_fill(const KeyHash& hash, uint64_t waiter) {
  FillWake gone;  // let go of outside the lock
  Shard& s = shard(hash);
  std::lock_guard lock(s.mu);
  auto it = s.fills.find(hash);
  if (it == s.fills.end()) return;
  auto& waiting = it->second.waiting;
  for (auto w = waiting.begin(); w != waiting.end(); ++w) {
    if (w->first != waiter) continue;
    gone = std::move(w->second);
    waiting.erase(w);
    break;
  }
}

void Zone::end_fill(const KeyHash& hash, uint64_t ticket, FillEnd end) {
  Shard& s = shard(hash);
  std::vector<std::pair<uint64_t, FillWake>> wakes;
  {
    std::lock_guard lock(s.mu);
    auto it = s.fills.find(hash);
    if (it == s.fills.end() || it->second.ticket != ticket) return;
    if (end == FillEnd::kFailed && it->second.fillers > 1) {
      --it->second.fillers;  // another filler may yet store the entry
      return;
    }
    wakes = std::move(it->second.waiting);
    s.fills.erase(it);
  }
  for (auto& [waiter, wake] : wakes) wake(end);
}

bool Zone::erase(const KeyHash& hash) {
  Shard& s = shard(hash);
  {
    std::lock_guard lock(s.mu);
    auto it = s.nodes.find(hash);
    if (it == s.nodes.end()) return false;
    remove(s, it->second);
    ::unlink(entry_path(options_.path, hash).c_str());
  }
  return true;
}

void Zone::forget(const Stored& gone) {
  Shard& s = shard(gone.hash);
  std::lock_guard lock(s.mu);
  auto it = s.nodes.find(gone.hash);
  if (it == s.nodes.end() || it->second.generation != gone.sequence) return;
  remove(s, it->second);
  ::unlink(entry_path(options_.path, gone.hash).c_str());
}

bool Zone::holds(const Stored& entry) const {
  if (is_purged(entry)) return false;
  const Shard& s = shards_[entry.hash.bytes[0] % kShards];
  std::lock_guard lock(s.mu);
  auto it = s.nodes.find(entry.hash);
  return it != s.nodes.end() && it->second.generation == entry.sequence;
}

void Zone::purge(std::string key, bool prefix) {
  std::lock_guard lock(purges_mu_);
  purges_.push_back({std::move(key), prefix, inserts_.load(std::memory_order_relaxed)});
  purging_.store(true, std::memory_order_release);
}

bool Zone::is_purged(const Stored& entry) const {
  if (!purging_.load(std::memory_order_acquire)) return false;
  std::lock_guard lock(purges_mu_);
  for (const Purge& p : purges_) {
    if (entry.sequence <= p.upto &&
        (p.prefix ? std::string_view(entry.head.key).starts_with(p.key) : entry.head.key == p.key)) {
      return true;
    }
  }
  return false;
}

size_t Zone::sweep_purges() {
  size_t covered = 0;
  {
    std::lock_guard lock(purges_mu_);
    covered = purges_.size();
  }
  if (covered == 0) return 0;
  size_t gone = 0;
  for (Shard& s : shards_) {
    struct Seen {
      KeyHash hash;
      uint64_t generation;
      std::shared_ptr<const Stored> loaded;
    };
    std::vector<Seen> seen;
    {
      std::lock_guard lock(s.mu);
      seen.reserve(s.nodes.size());
      for (const auto& [hash, node] : s.nodes) seen.push_back({hash, node.generation, node.loaded});
    }
    for (Seen& entry : seen) {
      std::shared_ptr<const Stored> stored = std::move(entry.loaded);
      if (!stored) {
        std::shared_ptr<Stored> read_back = read(entry_path(options_.path, entry.hash), entry.hash, 0);
        if (read_back) read_back->sequence = entry.generation;
        stored = std::move(read_back);
      }
      if (!stored || !is_purged(*stored)) continue;
      std::lock_guard lock(s.mu);
      auto it = s.nodes.find(entry.hash);
      if (it == s.nodes.end() || it->second.generation != entry.generation) continue;  // filled again meanwhile
      remove(s, it->second);
      ::unlink(entry_path(options_.path, entry.hash).c_str());
      ++gone;
    }
  }
  std::lock_guard lock(purges_mu_);
  purges_.erase(purges_.begin(), purges_.begin() + static_cast<std::ptrdiff_t>(covered));
  purging_.store(!purges_.empty(), std::memory_order_release);
  return gone;
}

size_t Zone::expire_inactive(int64_t now) {
  const int64_t before = now - options_.inactive.count();
  size_t gone = 0;
  for (Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    while (!s.used.empty() && s.used.back()->last_use < before) {
      const KeyHash hash = s.used.back()->hash;
      remove(s, *s.used.back());
      ::unlink(entry_path(options_.path, hash).c_str());
      ++gone;
    }
  }
  return gone;
}

void Zone::shrink() {
  while (disk_bytes_.load(std::memory_order_relaxed) > options_.max_size) {
    if (!evict_oldest(false)) break;
  }
  while (memory_bytes_.load(std::memory_order_relaxed) > options_.memory) {
    // Heads and bodies first; entries only when the nodes alone fill it.
    if (!evict_oldest(true) && !evict_oldest(false)) break;
  }
}

bool Zone::evict_oldest(bool loaded_only) {
  // The shard whose least recently used is the oldest: the zone's.
  Shard* oldest = nullptr;
  int64_t oldest_use = 0;
  for (Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    const Order& order = loaded_only ? s.loaded : s.used;
    if (order.empty()) continue;
    if (oldest == nullptr || order.back()->last_use < oldest_use) {
      oldest = &s;
      oldest_use = order.back()->last_use;
    }
  }
  if (oldest == nullptr) return false;
  std::lock_guard lock(oldest->mu);
  Order& order = loaded_only ? oldest->loaded : oldest->used;
  if (order.empty()) return true;  // another thread took it: look again
  Node& node = *order.back();
  if (loaded_only) {
    set_loaded(*oldest, node, nullptr);
    return true;
  }
  const KeyHash gone = node.hash;
  remove(*oldest, node);
  ::unlink(entry_path(options_.path, gone).c_str());
  return true;
}

Zone::Counts Zone::counts() const {
  return {entries_.load(std::memory_order_relaxed), disk_bytes_.load(std::memory_order_relaxed),
          memory_bytes_.load(std::memory_order_relaxed)};
}

}  // namespace tern::cache
