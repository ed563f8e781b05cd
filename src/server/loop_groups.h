// LoopGroups: each I/O loop's upstream::Groups for a list of upstreams
// (the proxy groups, the FastCGI pools). A loop makes its own when it
// starts (the owner's `make`, on the loop's thread: counts and connections
// are the loop's, no locks), and makes one again when the owner says its
// servers moved (remake(): a name resolved to new addresses). The old group
// retires and stays until the calls that began on it are over, so no
// request fails for the change.
//
// The owner outlives the loops' use of it: remake() posts to each loop, and
// the owner is destroyed only after a reload retired it and its requests
// ended, or after the loops stopped.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "net/loop_local.h"
#include "net/timer_wheel.h"
#include "upstream/group.h"

namespace tern::server {

class LoopGroups {
 public:
  // Makes group `index` for `loop`, on that loop's thread.
  using Make = std::function<std::unique_ptr<upstream::Group>(net::EventLoop* loop, size_t index)>;

  explicit LoopGroups(Make make) : make_(std::move(make)) {}
  LoopGroups(const LoopGroups&) = delete;
  LoopGroups& operator=(const LoopGroups&) = delete;

  // `count` groups for `loop`. On the loop's thread, before it serves.
  void init_loop(net::EventLoop* loop, size_t count);
  // This loop's group `index`; null on a loop without one.
  upstream::Group* get(size_t index) const;
  // Every loop makes group `index` again; the old one winds down. Any thread.
  void remake(size_t index);
  // Closes every loop's groups, each on its loop's thread (waits): requests
  // still on their way get 502. Main thread, while the I/O loops run.
  void close(const std::vector<net::EventLoop*>& loops);
  // A reload replaced these groups: this loop's wind down. Loop thread.
  void retire_loop(net::EventLoop* loop);

 private:
  struct LoopState {
    std::vector<std::unique_ptr<upstream::Group>> groups;
    // Remade, until their calls are over.
    std::vector<std::unique_ptr<upstream::Group>> replaced;
    net::TimerId prune;
  };

  void replace(net::EventLoop* loop, size_t index);
  static void prune(LoopState* state, net::EventLoop* loop);

  const Make make_;
  net::LoopLocal<LoopState> loops_;
};

}  // namespace tern::server
