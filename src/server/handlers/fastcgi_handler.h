// FastCgiRoutes: the [[fastcgi]] blocks of the config, turned into
// Exchange handlers that pass matching requests to php-fpm.
//
// A request is matched against each block in order: a path ending in '/'
// runs the block's index script ("/" -> "/index.php") if that file exists;
// otherwise a path the block's regular expression finds a match in runs the
// script of that name under the block's root. A script that does not exist
// is answered 404 here, without asking the application (nginx's
// "try_files $uri =404", which also keeps PHP's security.limit_extensions
// from being the only guard). Everything else falls through to the static
// files.
//
// Each loop has its own connection pool per block (created by init_loop()
// on that loop's thread, destroyed by shutdown()); blocks with `cache` on
// share one ResponseCache between loops.
#pragma once

#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "http/exchange.h"
#include "http/request.h"
#include "server/config.h"
#include "server/response_cache.h"

namespace tern::net {
class EventLoop;
}

namespace tern::server {

class FastCgiRoutes {
 public:
  // `static_root` is the root of blocks that set none; `software` is
  // SERVER_SOFTWARE ("tern/0.1.0").
  FastCgiRoutes(const std::vector<FastCgiConfig>& blocks, const std::string& static_root,
                std::string software);
  ~FastCgiRoutes();
  FastCgiRoutes(const FastCgiRoutes&) = delete;
  FastCgiRoutes& operator=(const FastCgiRoutes&) = delete;

  bool empty() const { return blocks_.empty(); }
  // On each I/O loop's thread, before it serves.
  void init_loop(net::EventLoop* loop);
  // Closes the pools, each on its loop's thread (waits). Main thread, while
  // the I/O loops still run.
  void shutdown(const std::vector<net::EventLoop*>& loops);

  // The handler for this request, or nullptr. Loop thread.
  const http::ExchangeHandler* route(const http::Request& request);

  struct LoopState;  // one loop's pools (defined in the .cc)

 private:
  struct Block;

  // The block and script for `request`; false if none matches.
  bool match(const http::Request& request, const Block** block, std::string* script) const;
  void handle(const Block& block, http::Exchange& exchange);

  std::vector<std::unique_ptr<Block>> blocks_;
  const std::string software_;
  std::mutex loops_mu_;  // guards loops_ while loops start and stop
  std::vector<std::unique_ptr<LoopState>> loops_;
};

}  // namespace tern::server
