// GroupPerLoop: one upstream::Group for each loop a handler serves on,
// made on that loop at its first request (its counts and connections are
// the loop's: no locks), closed when the server goes.
//
//   GroupPerLoop groups([this](net::EventLoop* loop) { return std::make_unique<Group>(loop, ...); });
//   Group& group = groups.current();  // in a handler's start()
//   groups.close(loop);               // in its close_loop()
//
// A closed group stays until this object goes (after the loops stopped):
// a request still on its way finds pools that answer 502. current() and
// close() are loop thread only.
#pragma once

#include <functional>
#include <memory>
#include <utility>

#include "net/event_loop.h"
#include "net/loop_local.h"
#include "upstream/group.h"

namespace tern::upstream {

class GroupPerLoop {
 public:
  using Make = std::function<std::unique_ptr<Group>(net::EventLoop* loop)>;

  explicit GroupPerLoop(Make make) : make_(std::move(make)) {}
  GroupPerLoop(const GroupPerLoop&) = delete;
  GroupPerLoop& operator=(const GroupPerLoop&) = delete;

  // This loop's group, made now if it has none.
  Group& current() {
    net::EventLoop* loop = net::EventLoop::current();
    if (Slot* slot = slots_.get(loop)) return *slot->group;
    return *slots_.emplace(loop, make_(loop)).group;
  }
  // Closes `loop`'s group, if it made one.
  void close(net::EventLoop* loop) {
    if (Slot* slot = slots_.get(loop)) slot->group->close();
  }

 private:
  struct Slot {
    explicit Slot(std::unique_ptr<Group> made) : group(std::move(made)) {}
    std::unique_ptr<Group> group;
  };

  Make make_;
  net::LoopLocal<Slot> slots_;
};

}  // namespace tern::upstream
