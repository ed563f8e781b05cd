#include "server/loop_groups.h"

#include "net/event_loop.h"
#include "server/upstreams.h"

namespace tern::server {

void LoopGroups::init_loop(net::EventLoop* loop, size_t count) {
  LoopState* state = &loops_.emplace(loop);
  for (size_t i = 0; i < count; ++i) state->groups.push_back(make_(loop, i));
}

upstream::Group* LoopGroups::get(size_t index) const {
  LoopState* state = loops_.current();
  if (state == nullptr || index >= state->groups.size()) return nullptr;
  return state->groups[index].get();
}

void LoopGroups::remake(size_t index) {
  loops_.for_each([this, index](net::EventLoop* loop, LoopState&) {
    loop->queue_in_loop([this, loop, index] { replace(loop, index); });
  });
}

void LoopGroups::replace(net::EventLoop* loop, size_t index) {
  LoopState* state = loops_.get(loop);
  if (state == nullptr || index >= state->groups.size()) return;
  std::unique_ptr<upstream::Group>& current = state->groups[index];
  current->retire();
  state->replaced.push_back(std::move(current));
  current = make_(loop, index);
  prune(state, loop);
}

void LoopGroups::prune(LoopState* state, net::EventLoop* loop) {
  std::erase_if(state->replaced, [](const std::unique_ptr<upstream::Group>& group) { return group->calls() == 0; });
  if (state->replaced.empty() || state->prune.valid()) return;
  // Those still in use are looked at again later.
  state->prune = loop->run_after(std::chrono::seconds(5), [state, loop] {
    state->prune = net::TimerId{};
    prune(state, loop);
  });
}

void LoopGroups::close(const std::vector<net::EventLoop*>& loops) {
  // Closed, not destroyed: a request still on its way finds pools that
  // answer 502, and the groups go with this object, after the loops.
  loops_.for_each([this, &loops](net::EventLoop* loop, LoopState&) {
    run_on_loop_and_wait(loop, loops, [this, loop] {
      LoopState* state = loops_.get(loop);
      for (auto& group : state->groups) group->close();
      for (auto& group : state->replaced) group->close();
      if (state->prune.valid()) loop->cancel(state->prune);
      state->prune = net::TimerId{};
    });
  });
}

void LoopGroups::retire_loop(net::EventLoop* loop) {
  if (LoopState* state = loops_.get(loop)) {
    for (auto& group : state->groups) group->retire();
    // What was replaced goes with this object now (it outlives its
    // requests), not by a timer that could outlive it.
    if (state->prune.valid()) loop->cancel(state->prune);
    state->prune = net::TimerId{};
  }
}

}  // namespace tern::server
