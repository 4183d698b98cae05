#include "exogym/runtime/checkpoint/stop_point.h"

#include <algorithm>

namespace exogym::runtime::checkpoint {

StopPoint::StopPoint(int first, int count, int64_t start) : first_(first), reached_(count, start) {}

bool StopPoint::stop_here(int rank, int64_t step, bool requested) {
  std::lock_guard<std::mutex> lock(mutex_);
  reached_[rank - first_] = step;
  if (!stop_ && requested) stop_ = *std::max_element(reached_.begin(), reached_.end());
  return stop_ && *stop_ == step;
}

}  // namespace exogym::runtime::checkpoint
