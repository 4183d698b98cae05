#include "exogym/runtime/threads/compute_slots.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <stdexcept>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::threads {

ComputeSlots::ComputeSlots(int slots, AbortSignal& abort) : capacity_(slots), free_(slots), abort_(abort) {
  EXOGYM_CHECK_INTERNAL(slots >= 1, "ComputeSlots: need at least one slot");
  for (int i = slots - 1; i >= 0; --i) free_ids_.push_back(i);
  abort_.on_abort([this] {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Waiter* w : enrolled_) w->cv.notify_all();
  });
}

void ComputeSlots::enroll(Waiter& w) {
  std::lock_guard<std::mutex> lock(mutex_);
  enrolled_.push_back(&w);
}

void ComputeSlots::withdraw(Waiter& w) {
  std::lock_guard<std::mutex> lock(mutex_);
  enrolled_.erase(std::remove(enrolled_.begin(), enrolled_.end(), &w), enrolled_.end());
  queue_.erase(std::remove(queue_.begin(), queue_.end(), &w), queue_.end());
}

void ComputeSlots::take_free_locked(Waiter& w) {
  --free_;
  w.slot = free_ids_.back();
  free_ids_.pop_back();
  if (cpus_.empty() || w.pinned_to == w.slot) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus_[w.slot]) CPU_SET(c, &set);
  // Pinning is an optimisation: if the system refuses, run unpinned.
  if (pthread_setaffinity_np(w.thread, sizeof(set), &set) == 0) w.pinned_to = w.slot;
}

void ComputeSlots::hand_over_locked() {
  while (free_ > 0 && !queue_.empty()) {
    Waiter* next = queue_.front();
    queue_.pop_front();
    take_free_locked(*next);
    next->granted = true;
    next->cv.notify_one();
  }
}

void ComputeSlots::acquire(Waiter& w) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (abort_.aborted()) throw sdk::AbortedError("run aborted: " + abort_.reason());
  if (free_ > 0 && queue_.empty()) {
    take_free_locked(w);
    return;
  }
  w.granted = false;
  queue_.push_back(&w);
  w.cv.wait(lock, [&] { return w.granted || abort_.aborted(); });
  if (!w.granted) {
    queue_.erase(std::remove(queue_.begin(), queue_.end(), &w), queue_.end());
    throw sdk::AbortedError("run aborted: " + abort_.reason());
  }
}

void ComputeSlots::give_back_locked(Waiter& w) {
  if (w.slot < 0) return;  // held none
  free_ids_.push_back(w.slot);
  w.slot = -1;
  ++free_;
  hand_over_locked();
}

void ComputeSlots::release(Waiter& w) {
  std::lock_guard<std::mutex> lock(mutex_);
  give_back_locked(w);
}

void ComputeSlots::release_and_park(Waiter& w) {
  std::lock_guard<std::mutex> lock(mutex_);
  w.granted = false;
  give_back_locked(w);
}

void ComputeSlots::pin_threads() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (static_cast<int>(cpus.size()) < capacity_) return;
  const size_t per_slot = cpus.size() / static_cast<size_t>(capacity_);
  cpus_.assign(capacity_, {});
  for (int s = 0; s < capacity_; ++s) cpus_[s].assign(cpus.begin() + s * per_slot, cpus.begin() + (s + 1) * per_slot);
}

void ComputeSlots::grant(const std::vector<Waiter*>& waiters) {
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.insert(queue_.end(), waiters.begin(), waiters.end());
  hand_over_locked();
}

void ComputeSlots::wait_granted(Waiter& w) {
  std::unique_lock<std::mutex> lock(mutex_);
  w.cv.wait(lock, [&] { return w.granted || abort_.aborted(); });
  if (!w.granted) {
    queue_.erase(std::remove(queue_.begin(), queue_.end(), &w), queue_.end());
    throw sdk::AbortedError("run aborted: " + abort_.reason());
  }
}

}  // namespace exogym::runtime::threads
