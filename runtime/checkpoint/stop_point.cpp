#include "exogym/runtime/checkpoint/stop_point.h"

#include <algorithm>

namespace exogym::runtime::checkpoint {

StopPoint::StopPoint(int first, int count, int64_t start) : first_(first), reached_(count, start) {}

bool StopPoint::stop_here(int rank, int64_t step, bool requested) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto self = static_cast<size_t>(rank - first_);
  reached_[self] = step;
  if (!stop_ && requested) {
    // Boundaries the other nodes reached are behind them: they did not stop.
    int64_t stop = step;
    for (size_t i = 0; i < reached_.size(); ++i) {
      if (i != self) stop = std::max(stop, reached_[i] + 1);
    }
    stop_ = stop;
  }
  return stop_ && *stop_ == step;
}

}  // namespace exogym::runtime::checkpoint
