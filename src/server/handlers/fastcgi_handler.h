// FastCgiRoutes: the FastCGI blocks of the config's locations, turned into
// Exchange handlers that pass matching requests to php-fpm. Each block is
// one handler on its location's chain (server/handler.h), asked with the
// request's decoded and normalised path:
//   - a path ending in '/' runs the block's index script ("/" ->
//     "/index.php") if that file exists;
//   - otherwise the script is the longest prefix of the path, ending at a
//     segment boundary, that the block's regular expression finds a match
//     in and that exists as a regular file; what follows it is PATH_INFO
//     ("/doku.php/wiki:page" runs /doku.php with PATH_INFO "/wiki:page", as
//     nginx's fastcgi_split_path_info). A prefix the expression does not
//     match is never run: "/upload/evil.jpg/x.php" runs nothing.
//   - a path the expression matches whole but that names no script is
//     answered 404 here, without asking the application (nginx's
//     "try_files $uri =404", which also keeps PHP's
//     security.limit_extensions from being the only guard).
// Everything else passes on to the next handler (the static files).
// Scripts are looked up
// beneath the block's root with the static files' symlink policy (a link
// out of the root is 403, as for a file), through a per-loop cache of what
// exists (the chain refuses dotfiles before any handler runs).
// A method the block does not list (TRACE by default) is 405.
//
// Each loop has its own connection pools (upstream::Groups, created by
// init_loop() on that loop's thread, closed by shutdown()), one per
// application: blocks that pass to the same address or [[upstream]] with
// the same pool settings (pool, queue, timeouts) share it, whichever
// locations they are in, so `pool` x workers is what php-fpm must have
// children for, however many locations pass to it. An application given
// by name ("php:9000", or an [[upstream]] server) is looked up on the main
// loop (UpstreamNames) and its pools made again on each loop when the
// answer changes, as for a proxy's. A block with `cache` keeps responses in
// a [[cache]] zone (upstream_cache.h).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fastcgi/relay.h"
#include "http/exchange.h"
#include "http/request.h"
#include "net/loop_local.h"
#include "server/config/config.h"
#include "server/loop_groups.h"
#include "server/handler.h"
#include "server/upstream_names.h"
#include "upstream/group.h"

namespace tern::net {
class EventLoop;
}

namespace tern::server {

class CacheZones;
class Metrics;

class FastCgiRoutes {
 public:
  // `blocks` with their roots set (fastcgi_blocks()); from config the
  // symlink rule, the temp directory and the server name. `software` is
  // SERVER_SOFTWARE ("tern/0.1.0"). The pools and the caches count into
  // `metrics` (null: nowhere); the caches are zones of `caches`. Throws
  // std::runtime_error when a block's root cannot be opened or its cache
  // names no zone.
  FastCgiRoutes(const Config& config, const std::vector<FastCgiConfig>& blocks, std::string software,
                const CacheZones* caches = nullptr, Metrics* metrics = nullptr);
  ~FastCgiRoutes();
  FastCgiRoutes(const FastCgiRoutes&) = delete;
  FastCgiRoutes& operator=(const FastCgiRoutes&) = delete;

  bool empty() const { return blocks_.empty(); }
  // On each I/O loop's thread, before it serves.
  void init_loop(net::EventLoop* loop);
  // Closes the pools, each on its loop's thread (waits). Main thread, while
  // the I/O loops still run; requests after it get 502.
  void shutdown(const std::vector<net::EventLoop*>& loops);
  // A reload replaced these blocks: this loop's pools wind down, serving
  // the requests that began under them (ConnectionPool::retire). On the
  // loop's thread.
  void retire_loop(net::EventLoop* loop);
  // The lookups of applications given by name, on `loop` (the main one),
  // before any init_loop(); stopped on that loop's thread.
  void start_names(net::EventLoop* loop);
  void stop_names();

  // The handler of `block` for a request with this normalised path, or
  // nullptr. Loop thread; the handler returned must be run before the next
  // call (the chain does).
  const http::ExchangeHandler* route(size_t block, std::string_view path);
  // Runs what route() found for `block` (right after it), with an answer
  // for the application's X-Accel-Redirect.
  using InternalRedirect = decltype(upstream::CallOptions::internal_redirect);
  void start(size_t block, const Route& route, http::Exchange& exchange, InternalRedirect redirect);
  size_t size() const { return blocks_.size(); }

  struct LoopState;  // one loop's pools and script cache (defined in the .cc)

 private:
  struct Block;
  // The pool settings and servers blocks share a pool by.
  struct Pool {
    std::string key;
    const Block* first;  // its settings
  };

  // Pool `index`'s php-fpm servers now.
  std::vector<upstream::GroupServer> servers(size_t pool) const;
  std::unique_ptr<upstream::Group> make_group(net::EventLoop* loop, size_t pool) const;
  void handle(const Block& block, const Route& route, http::Exchange& exchange, InternalRedirect redirect);

  std::vector<std::unique_ptr<Block>> blocks_;
  std::vector<Pool> pools_;
  std::vector<UpstreamConfig> applications_;  // one per pool: its servers, by address or name
  std::unique_ptr<UpstreamNames> names_;
  const std::string software_;
  const std::string server_name_;
  const std::string temp_dir_;
  const bool symlinks_anywhere_;
  const std::chrono::milliseconds cache_valid_;
  LoopGroups groups_;  // one per pool
  net::LoopLocal<LoopState> loops_;
  Metrics* metrics_ = nullptr;
};

}  // namespace tern::server
