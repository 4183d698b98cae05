#pragma once
// The simulated cluster: one thread per virtual node, compute slots, the
// in-process collective backend, and clean abort. If any node throws, every
// collective in flight fails, all threads end, and run() rethrows the first
// error.
#include <functional>
#include <memory>

#include "exogym/runtime/abort_signal.h"
#include "exogym/runtime/compute_slots.h"
#include "exogym/runtime/inprocess_group.h"

namespace exogym::runtime {

class Cluster {
 public:
  // parallelism: how many nodes compute at once (>= 1).
  Cluster(int nodes, int parallelism);

  int nodes() const { return nodes_; }
  int parallelism() const { return slots_.capacity(); }
  AbortSignal& abort_signal() { return abort_; }
  InProcessGroup& group() { return group_; }
  ComputeSlots& slots() { return slots_; }

  // Runs body(rank, slot) on one thread per node and waits for all. The body
  // starts without a slot; it acquires one before computing.
  void run(const std::function<void(int rank, NodeSlot& slot)>& body);

 private:
  int nodes_;
  AbortSignal abort_;
  ComputeSlots slots_;
  InProcessGroup group_;
};

// The number of hardware threads this process may use.
int available_cores();

}  // namespace exogym::runtime
