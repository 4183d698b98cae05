#include "exogym/runtime/checkpoint/stop_point.h"

#include <algorithm>

namespace exogym::runtime::checkpoint {

StopPoint::StopPoint(int first, int count, int64_t start, bool shared)
    : first_(first), shared_(shared), reached_(count, start) {}

StopPoint::Answer StopPoint::at_boundary(int rank, int64_t step, bool requested) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto self = static_cast<size_t>(rank - first_);
  reached_[self] = step;
  if (shared_) {
    if (stop_) return *stop_ == step ? Answer::Stop : Answer::Go;
    return proposal_ && *proposal_ == step && !abandoned_ ? Answer::Wait : Answer::Go;
  }
  if (!stop_ && requested) {
    // Boundaries the other nodes reached are behind them: they did not stop.
    int64_t stop = step;
    for (size_t i = 0; i < reached_.size(); ++i) {
      if (i != self) stop = std::max(stop, reached_[i] + 1);
    }
    stop_ = stop;
  }
  return stop_ && *stop_ == step ? Answer::Stop : Answer::Go;
}

int64_t StopPoint::propose() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!proposal_) proposal_ = *std::max_element(reached_.begin(), reached_.end()) + 1;
  return *proposal_;
}

void StopPoint::agree(int64_t stop) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = stop;
  }
  agreed_cv_.notify_all();
}

bool StopPoint::wait_for_agreement() {
  std::unique_lock<std::mutex> lock(mutex_);
  agreed_cv_.wait(lock, [&] { return stop_ || abandoned_; });
  return stop_.has_value();
}

void StopPoint::abandon() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    abandoned_ = true;
  }
  agreed_cv_.notify_all();
}

}  // namespace exogym::runtime::checkpoint
