#include "exogym/runtime/train/loop_span.h"

#include <algorithm>

namespace exogym::runtime::train {

void LoopSpan::note_start() {
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  if (start_ == Clock::time_point{} || now < start_) start_ = now;
}

void LoopSpan::note_mark() {
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  if (mark_ == Clock::time_point{} || now < mark_) mark_ = now;
}

void LoopSpan::note_end() {
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  end_ = std::max(end_, now);
}

}  // namespace exogym::runtime::train
