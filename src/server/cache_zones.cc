#include "server/cache_zones.h"

#include <chrono>
#include <ctime>
#include <stdexcept>
#include <system_error>

#include "base/log.h"
#include "net/event_loop.h"
#include "server/process/privileges.h"

namespace tern::server {

CacheZones::CacheZones(const std::vector<CacheZoneConfig>& configs, const std::string& owner,
                       const std::string& group, TaskPool* tasks)
    : tasks_(tasks) {
  const std::optional<Identity> identity = future_owner(owner, group);
  for (const CacheZoneConfig& c : configs) {
    make_private_dirs(c.path, identity, "cache " + c.name);
    cache::ZoneOptions options;
    options.name = c.name;
    options.path = c.path;
    options.max_size = c.max_size;
    options.memory = c.memory;
    options.inactive = std::chrono::duration_cast<std::chrono::seconds>(c.inactive);
    zones_.push_back(std::make_unique<cache::Zone>(std::move(options)));
  }
}

CacheZones::~CacheZones() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (manager_.joinable()) manager_.join();
}

cache::Zone* CacheZones::find(std::string_view name) const {
  for (const auto& zone : zones_) {
    if (zone->options().name == name) return zone.get();
  }
  return nullptr;
}

void CacheZones::start() {
  if (zones_.empty() || manager_.joinable()) return;
  manager_ = std::thread([this] { manage(); });
}

files::OpenFileCache* CacheZones::entry_files(const cache::Zone& zone) const {
  net::EventLoop* loop = net::EventLoop::current();
  if (loop == nullptr) return nullptr;
  LoopFiles* files = loops_.get(loop);
  if (files == nullptr) {
    files = &loops_.emplace(loop);
    files::OpenFileCacheOptions options;
    options.max_entries = kEntryFilesPerLoop;
    options.symlinks = files::SymlinkPolicy::kAnywhere;  // the zone's own directories
    options.cache_not_found = false;              // a hit is for a file the index knows
    options.memory_max_file_bytes = 0;            // small bodies are in the index already
    for (const auto& z : zones_) {
      try {
        files->zones.push_back(std::make_unique<files::OpenFileCache>(z->options().path, options));
      } catch (const std::system_error& e) {
        TERN_LOG_WARN("cache {}: {}: its entries are not served from their files", z->options().name, e.what());
        files->zones.push_back(nullptr);
      }
    }
  }
  const auto now = loop->clock().now();
  if (now - files->swept >= std::chrono::seconds(1)) {
    files->swept = now;
    for (const auto& cache : files->zones) {
      if (cache) cache->drop_unused(now - kEntryFileIdle);
    }
  }
  for (size_t i = 0; i < zones_.size(); ++i) {
    if (zones_[i].get() == &zone) return files->zones[i].get();
  }
  return nullptr;
}

size_t CacheZones::shed_descriptors() const {
  LoopFiles* files = loops_.current();
  if (files == nullptr) return 0;
  size_t closed = 0;
  for (const auto& cache : files->zones) {
    if (cache) closed += cache->shed_descriptors();
  }
  return closed;
}

void CacheZones::manage() {
  for (const auto& zone : zones_) {
    const auto began = std::chrono::steady_clock::now();
    const size_t entries = zone->load();
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began);
    const cache::Zone::Counts counts = zone->counts();
    TERN_LOG_INFO("cache {}: {} entries ({} bytes) read back from {} in {} ms", zone->options().name, entries,
                  counts.disk_bytes, zone->options().path, took.count());
  }
  std::unique_lock lock(mu_);
  while (!wake_.wait_for(lock, std::chrono::seconds(5), [this] { return stopping_; })) {
    lock.unlock();
    for (const auto& zone : zones_) {
      zone->expire_inactive(static_cast<int64_t>(std::time(nullptr)));
      if (const size_t purged = zone->sweep_purges(); purged > 0) {
        TERN_LOG_INFO("cache {}: {} purged entries removed", zone->options().name, purged);
      }
    }
    lock.lock();
  }
}

}  // namespace tern::server
