#include "exogym/runtime/compute_slots.h"

#include <stdexcept>

#include "exogym/sdk/error.h"

namespace exogym::runtime {

ComputeSlots::ComputeSlots(int slots, AbortSignal& abort) : capacity_(slots), free_(slots), abort_(abort) {
  if (slots < 1) throw std::invalid_argument("ComputeSlots: need at least one slot");
  abort_.on_abort([this] {
    std::lock_guard<std::mutex> lock(mutex_);
    cv_.notify_all();
  });
}

void ComputeSlots::acquire() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return free_ > 0 || abort_.aborted(); });
  if (abort_.aborted()) throw sdk::AbortedError("run aborted: " + abort_.reason());
  --free_;
}

void ComputeSlots::release() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++free_;
  }
  cv_.notify_one();
}

}  // namespace exogym::runtime
