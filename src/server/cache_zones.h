// CacheZones: the server's [[cache]] zones (cache/zone.h), made at start
// and kept for the life of the process (a reload does not change them: a
// restart setting). A manager thread reads each zone's directory back into
// its index (a restart keeps the cache: until it is read, a key is a miss)
// and then, every few seconds, removes the entries unused for `inactive`,
// as nginx's cache loader and manager processes do.
//
// Owned by the Server; outlives the handlers that name its zones.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "cache/zone.h"
#include "server/config/cache_config.h"

namespace tern::server {

class CacheZones {
 public:
  // Makes the zones' directories (owned by `owner` when the process runs
  // as root and will become that user; empty: nobody). Throws
  // std::runtime_error naming a directory that cannot be made.
  CacheZones(const std::vector<CacheZoneConfig>& configs, const std::string& owner);
  ~CacheZones();  // stops the manager
  CacheZones(const CacheZones&) = delete;
  CacheZones& operator=(const CacheZones&) = delete;

  // The zone named `name`, or null.
  cache::Zone* find(std::string_view name) const;
  bool empty() const { return zones_.empty(); }
  const std::vector<std::unique_ptr<cache::Zone>>& zones() const { return zones_; }

  // Starts the manager thread (after the process became its user).
  void start();

 private:
  void manage();

  std::vector<std::unique_ptr<cache::Zone>> zones_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread manager_;
};

}  // namespace tern::server
