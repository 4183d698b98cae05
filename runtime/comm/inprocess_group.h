#pragma once
// The in-process collective backend: K node threads meet at a rendezvous for
// every collective. The last node to arrive does the collective's work (with
// the group's work crew), then wakes the others as compute slots allow: one
// wake-up per node and collective, since waking a thread is expensive.
// Reductions combine ranks in rank order, element by element, so results are
// bit-identical for any thread scheduling, `parallelism` or work split.
#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exogym/runtime/cluster/abort_signal.h"
#include "exogym/runtime/cluster/work_crew.h"
#include "exogym/sdk/comm.h"

namespace exogym::runtime::cluster {
class NodeSlot;
}

namespace exogym::runtime::comm {


class InProcessGroup {
 public:
  // `helpers`: threads that join the last node in a collective's work
  // (parallelism − 1 keeps the run within its compute slots).
  InProcessGroup(int size, cluster::AbortSignal& abort, int helpers = 0);
  ~InProcessGroup();
  int size() const { return size_; }

  // The communicator node `rank` uses. `slot` (may be null) is released while
  // the node waits for the others.
  std::unique_ptr<sdk::Communicator> communicator(int rank, cluster::NodeSlot* slot = nullptr);

 private:
  friend class InProcessCommunicator;
  enum class Kind { AllReduce, Broadcast, AllGather, Barrier };
  struct Posted {
    Kind kind = Kind::Barrier;
    sdk::ReduceOp op = sdk::ReduceOp::Sum;
    int root = 0;
    // Handles to the node's (contiguous) tensors. Held by value: if a node
    // leaves early (it failed), the storage others may still be reading
    // stays alive until the group moves on.
    std::vector<at::Tensor> tensors;
    std::vector<std::vector<at::Tensor>>* gathered = nullptr;  // written only by its owner
  };

  void run(int rank, Posted posted, cluster::NodeSlot* slot);
  // The last node's part: every node has posted.
  void check_matching(int rank) const;
  void execute();
  void reduce(const std::vector<int64_t>& chunk_tensor, const std::vector<int64_t>& chunk_start, int64_t index);
  [[noreturn]] void fail(const std::string& message);

  const int size_;
  cluster::AbortSignal& abort_;
  std::vector<Posted> posted_;
  std::vector<cluster::NodeSlot*> parked_;  // the nodes that gave a compute slot back to wait
  cluster::WorkCrew crew_;

  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace exogym::runtime::comm
