#include "http1/request_state.h"

#include <algorithm>

namespace tern::http {

std::unique_ptr<RequestState> RequestStatePool::acquire() {
  if (free_.empty()) {
    fewest_idle_ = 0;
    return std::make_unique<RequestState>();
  }
  std::unique_ptr<RequestState> state = std::move(free_.back());
  free_.pop_back();
  fewest_idle_ = std::min(fewest_idle_, free_.size());
  return state;
}

void RequestStatePool::release(std::unique_ptr<RequestState> state, Time now) {
  state->body.clear();
  free_.push_back(std::move(state));
  if (now - period_start_ < kPeriod) return;
  // Spares that were never taken during the period were not needed.
  size_t unneeded = std::min(fewest_idle_, free_.size() > kMinSpare ? free_.size() - kMinSpare : 0);
  free_.resize(free_.size() - unneeded);
  fewest_idle_ = free_.size();
  period_start_ = now;
}

void RequestStatePool::trim() {
  if (free_.size() > kMinSpare) free_.resize(kMinSpare);
  fewest_idle_ = free_.size();
}

}  // namespace tern::http
