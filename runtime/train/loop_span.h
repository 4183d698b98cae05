#pragma once
// The training loop runs from the first node's first step to the last node's
// last: with fewer compute slots than nodes, node 0 may wait behind others,
// so its own times would hide part of the work. Every node notes both ends.
#include <chrono>
#include <cstdint>
#include <mutex>

namespace exogym::runtime::train {

class LoopSpan {
 public:
  using Clock = std::chrono::steady_clock;

  void note_start();
  void note_end();
  // Whether any node of this process started its loop.
  bool started() const { return start_ != Clock::time_point{}; }
  Clock::time_point start() const { return start_; }
  Clock::time_point end() const { return end_; }

  // For benchmarks (TrainingOptions::timing_mark_step): when the first node
  // finished step `mark_step` (0-based).
  int64_t mark_step = -1;
  void note_mark();
  bool marked() const { return mark_ != Clock::time_point{}; }
  Clock::time_point mark() const { return mark_; }

 private:
  std::mutex mutex_;
  Clock::time_point start_, end_, mark_;
};

}  // namespace exogym::runtime::train
