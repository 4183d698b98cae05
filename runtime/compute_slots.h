#pragma once
// At most `parallelism` nodes compute at once. A node holds a slot while it
// computes and gives it back while it waits in a collective, so that K node
// threads share P cores without oversubscribing them (OpenMP teams spinning
// on 2 cores are catastrophic: see DESIGN §3).
#include <condition_variable>
#include <mutex>

#include "exogym/runtime/abort_signal.h"

namespace exogym::runtime {

class ComputeSlots {
 public:
  ComputeSlots(int slots, AbortSignal& abort);
  int capacity() const { return capacity_; }
  // Blocks until a slot is free; throws sdk::AbortedError if the run aborts.
  void acquire();
  void release();

 private:
  const int capacity_;
  int free_;
  AbortSignal& abort_;
  std::mutex mutex_;
  std::condition_variable cv_;
};

// One node's claim on a slot. The node releases it while it waits in a
// collective and re-acquires it afterwards; if a wait throws (abort), the slot
// is simply not held and the destructor has nothing to give back.
class NodeSlot {
 public:
  explicit NodeSlot(ComputeSlots* slots) : slots_(slots) {}
  ~NodeSlot() {
    if (held_) slots_->release();
  }
  NodeSlot(const NodeSlot&) = delete;
  NodeSlot& operator=(const NodeSlot&) = delete;

  void acquire() {
    if (slots_ && !held_) {
      slots_->acquire();
      held_ = true;
    }
  }
  void release() {
    if (slots_ && held_) {
      held_ = false;
      slots_->release();
    }
  }
  bool held() const { return held_; }

 private:
  ComputeSlots* slots_;
  bool held_ = false;
};

}  // namespace exogym::runtime
