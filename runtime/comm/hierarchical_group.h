#pragma once
// The collective backend of a run spread over several processes. This
// process hosts a contiguous block of the K virtual nodes (world.h); each
// collective meets in the process first (the nodes' threads rendezvous as in
// InProcessGroup), then one node thread, the block's first, exchanges the
// process's part with the other processes through the ProcessMesh (Gloo),
// and every local node takes the result. Strategies see the same
// sdk::Communicator, with global ranks.
//
// Reductions. With `exact` (the runtime's default), floating-point sums
// travel per node and every process sums all K contributions in rank order,
// exactly as InProcessGroup does: the same bits as one process, whatever the
// process count. Without it, each process reduces its nodes in rank order
// into one partial result and every process folds the P partials in process
// order: K/P times less traffic between processes, all processes still hold
// the same bits and runs with the same process count are bit-identical, but
// sums differ from a single-process run by association (last bits), which
// training can amplify over many steps. Min, max and integer sums are exact
// either way.
//
// CUDA tensors travel through host memory, except all-reduces in builds with
// NCCL (nccl/nccl_exchange.h).
//
// The simulated clock: each exchange carries the process's latest arrival
// (ClockExchange::take_local), so every node's clock sees the latest arrival
// over all K nodes, as in one process.
#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exogym/build_config.h"
#include "exogym/runtime/cluster/abort_signal.h"
#include "exogym/runtime/dist/world.h"
#include "exogym/sdk/comm.h"

namespace exogym::runtime::cluster {
class NodeSlot;
}
namespace exogym::runtime::dist {
class ProcessMesh;
}
namespace exogym::runtime::sim {
class ClockExchange;
}

namespace exogym::runtime::comm {

class NcclExchange;

class HierarchicalGroup {
 public:
  // `nodes`: the run's K; this process hosts `block`. `clocks` may be null.
  HierarchicalGroup(dist::ProcessMesh& mesh, int nodes, dist::NodeBlock block, cluster::AbortSignal& abort, sim::ClockExchange* clocks,
                    bool exact);
  ~HierarchicalGroup();
  int size() const { return nodes_; }
  const dist::NodeBlock& block() const { return block_; }

  // The communicator of node `rank` (a global rank in this process's block).
  std::unique_ptr<sdk::Communicator> communicator(int rank, cluster::NodeSlot* slot = nullptr);

 private:
  friend class HierarchicalCommunicator;
  enum class Kind : int32_t { AllReduce, Broadcast, AllGather, Barrier };
  struct Posted {
    Kind kind = Kind::Barrier;
    sdk::ReduceOp op = sdk::ReduceOp::Sum;
    int root = 0;
    std::vector<at::Tensor> tensors;  // contiguous
  };
  struct Header;

  void run(int rank, Posted posted, cluster::NodeSlot* slot, std::vector<std::vector<at::Tensor>>* gathered);
  void arrive_and_wait(cluster::NodeSlot* slot);
  void lead();
  void check_local() const;
  std::vector<Header> exchange_headers(const Header& mine);
  // Each fills in the header's payload, exchanges headers, then the data.
  // Sends `send` (this process's payload, announced in headers[me]) to every
  // process and receives theirs: afterwards buffers_[q] holds process q's.
  void gather_payloads(const at::Tensor& send, const std::vector<Header>& headers);
  void lead_all_reduce(Header& mine);
  void lead_broadcast(Header& mine);
  void lead_all_gather(Header& mine);
#if EXOGYM_HAVE_NCCL
  // CUDA tensors: reduce on the GPU, then NCCL between processes.
  void lead_all_reduce_nccl(Header& mine);
  std::unique_ptr<NcclExchange> nccl_;
#endif
  bool per_node_blocks() const;

  dist::ProcessMesh& mesh_;
  const int nodes_;
  const dist::NodeBlock block_;
  cluster::AbortSignal& abort_;
  sim::ClockExchange* clocks_;
  const bool exact_;
  uint64_t sequence_ = 0;        // collectives so far (the leader's count)
  uint64_t clock_sequence_ = 0;  // the ClockExchange sequence of the current collective

  std::vector<Posted> posted_;  // by local index
  // Written by the leader between the two rendezvous of a collective, read
  // by every local node after the second.
  std::vector<at::Tensor> result_;                 // all_reduce, broadcast
  std::vector<std::vector<at::Tensor>> gathered_;  // all_gather, by global rank
  std::vector<at::Tensor> buffers_;                // byte buffers the results view

  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace exogym::runtime::comm
