#include "http/request_state.h"

namespace tern::http {

std::unique_ptr<RequestState> RequestStatePool::acquire() {
  if (free_.empty()) return std::make_unique<RequestState>();
  std::unique_ptr<RequestState> state = std::move(free_.back());
  free_.pop_back();
  return state;
}

void RequestStatePool::release(std::unique_ptr<RequestState> state) {
  state->body.clear();
  if (free_.size() < kMaxSpare) free_.push_back(std::move(state));
}

}  // namespace tern::http
