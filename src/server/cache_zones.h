// CacheZones: the server's [[cache]] zones (cache/zone.h), made at start
// and kept for the life of the process (a reload does not change them: a
// restart setting). A manager thread reads each zone's directory back into
// its index (a restart keeps the cache: until it is read, a key is a miss)
// and then, every few seconds, removes the entries unused for `inactive`,
// as nginx's cache loader and manager processes do.
//
// Each loop keeps the entry files it answers from open (an OpenFileCache
// per zone, rooted at the zone's directory), as nginx's open_file_cache does
// for its cache files: a hit then costs no open, fstat and close. An entry's
// file never changes once it is under its name (a later entry replaces it by
// a rename), and a hit checks that the descriptor is of the file the index
// knows (its inode). A file the zone removed stays open, its disk space held,
// until this loop's next hit in the zone finds it unused for
// kEntryFileIdle, a lookup a second later finds it gone, or newer files push
// it out (at most kEntryFilesPerLoop a loop and zone).
//
// A fill that writes a large file in one go (a revalidated entry's body,
// copied into its new file) does it on `tasks`, the server's pool for
// blocking work, so that the loop goes on serving meanwhile.
//
// Owned by the Server; outlives the handlers that name its zones.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "cache/zone.h"
#include "net/loop_local.h"
#include "server/config/cache_config.h"
#include "files/open_file_cache.h"

namespace tern {
class TaskPool;
}

namespace tern::server {

class CacheZones {
 public:
  static constexpr size_t kEntryFilesPerLoop = 1024;
  static constexpr std::chrono::seconds kEntryFileIdle{10};

  // Makes the zones' directories (owned by `owner`/`group` when the process
  // runs as root and will become that user; empty: nobody). Throws
  // std::runtime_error naming a directory that cannot be made. `tasks`
  // (null: none, the loops write) outlives it.
  CacheZones(const std::vector<CacheZoneConfig>& configs, const std::string& owner, const std::string& group,
             TaskPool* tasks = nullptr);
  ~CacheZones();  // stops the manager
  CacheZones(const CacheZones&) = delete;
  CacheZones& operator=(const CacheZones&) = delete;

  // The zone named `name`, or null.
  cache::Zone* find(std::string_view name) const;
  bool empty() const { return zones_.empty(); }
  const std::vector<std::unique_ptr<cache::Zone>>& zones() const { return zones_; }
  // Where a large write goes, off the loops (null: none).
  TaskPool* tasks() const { return tasks_; }

  // Starts the manager thread (after the process became its user).
  void start();

  // This loop's open entry files of `zone`, made on its first use; null
  // when the zone's directory cannot be opened (logged: the entries whose
  // bodies are in files then go to the application). Loop thread only.
  files::OpenFileCache* entry_files(const cache::Zone& zone) const;
  // The process is out of descriptors: this loop's entry files let go of
  // some (OpenFileCache::shed_descriptors). How many closed. Loop thread only.
  size_t shed_descriptors() const;

 private:
  // A loop's open entry files, by zone (as zones_).
  struct LoopFiles {
    std::vector<std::unique_ptr<files::OpenFileCache>> zones;
    std::chrono::steady_clock::time_point swept;  // last closed the idle ones
  };

  void manage();

  std::vector<std::unique_ptr<cache::Zone>> zones_;
  TaskPool* const tasks_;
  mutable net::LoopLocal<LoopFiles> loops_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread manager_;
};

}  // namespace tern::server
