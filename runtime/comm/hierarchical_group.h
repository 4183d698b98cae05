#pragma once
// The collective backend of a run spread over several processes. This
// process hosts a contiguous block of the K virtual nodes (world.h); each
// collective meets in the process first (the nodes' threads rendezvous as in
// InProcessGroup), then the last node to arrive exchanges the process's part
// with the other processes through the ProcessMesh (Gloo), and every local
// node takes the result. Strategies see the same sdk::Communicator, with
// global ranks.
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
// NCCL (nccl_exchange.h).
//
// The simulated clock: each exchange carries the process's latest arrival
// (ClockExchange::take_local), so every node's clock sees the latest arrival
// over all K nodes, as in one process.
//
// Failures (docs/simulation.md#failures-and-churn): set_members() names the
// live nodes. Collectives then run over them as InProcessGroup's do (sums
// and averages over the live nodes in rank order, all_gather one entry per
// live node), and a process whose nodes are all down sits them out
// (ProcessMesh::Scope::Members) until some come back.
//
// Collectives over a subgroup (group_all_reduce, group_all_gather, exchange)
// meet only the members: those of this process in process
// (group_meetings.h), then the last of them sends their tensors to each
// other process that hosts members and receives theirs (tagged messages,
// ProcessMesh::exchange_tagged), and every process folds all of them in
// rank order: the bits of one process.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exogym/build_config.h"
#include "exogym/runtime/comm/collective_backend.h"
#include "exogym/runtime/comm/cross_process_waits.h"
#include "exogym/runtime/comm/group_meetings.h"
#include "exogym/runtime/comm/meeting_point.h"
#include "exogym/runtime/dist/world.h"
#include "exogym/runtime/threads/abort_signal.h"
#include "exogym/sdk/comm.h"

namespace exogym::runtime::dist {
class ProcessMesh;
}
namespace exogym::runtime::sim {
class ClockExchange;
}

namespace exogym::runtime::comm {

class NcclExchange;
class TensorLayout;

class HierarchicalGroup final : public CollectiveBackend {
 public:
  // `nodes`: the run's K; this process hosts `block`. `clocks` may be null.
  HierarchicalGroup(dist::ProcessMesh& mesh, int nodes, dist::NodeBlock block, threads::AbortSignal& abort,
                    sim::ClockExchange* clocks, bool exact);
  ~HierarchicalGroup() override;
  int size() const override { return nodes_; }
  int live_count() const override { return static_cast<int>(live_.size()); }
  const std::vector<int>& live_ranks() const override { return live_; }
  void enter_elsewhere(int rank, const std::string& what) override { groups_.enter_elsewhere(rank, what); }
  void leave_elsewhere(int rank) override { groups_.leave(rank); }
  void leave_all_elsewhere(const std::vector<int>& ranks) override { groups_.leave_all(ranks); }
  const dist::NodeBlock& block() const { return block_; }

  // The nodes that take part in the next collectives (global ranks,
  // ascending). Called by every process at the same point with the same
  // list, while none of its nodes is in a collective: it exchanges among
  // every process.
  void set_members(std::vector<int> live);

  // The communicator of node `rank` (a global rank in this process's block).
  std::unique_ptr<sdk::Communicator> communicator(int rank, threads::NodeSlot* slot = nullptr);

  sdk::SharedTensors run(int rank, CollectiveCall call, threads::NodeSlot* slot) override;

 private:
  using Calls = MeetingPoint::Calls;
  // What each process's leader sends before the data: enough to check that
  // every process calls the same collective, to size the data, and to carry
  // the latest arrival for the simulated clocks.
  struct Header {
    uint64_t sequence = 0;
    int32_t kind = 0, op = 0, root = 0, count = 0;
    uint64_t signature = 0;
    uint64_t payload = 0;  // bytes this process sends
    double arrival = 0;    // the latest arrival of this process's nodes
    int32_t has_arrival = 0;
    int32_t blocks = 0;  // all_reduce: reduced blocks in the payload
  };

  // The last local node's part (the leader's): every local node has posted.
  void lead(const Calls& calls);
  // Collectives over a subgroup (hierarchical_groups.cpp): its members here
  // meet, then the last of them exchanges with the processes that host the
  // others, tagged by the group and its count of meetings.
  void run_group(int rank, CollectiveCall call, threads::NodeSlot* slot);
  void exchange_group(const std::vector<int>& members, const std::vector<int>& local,
                      const std::vector<CollectiveCall*>& calls, uint64_t meeting);
  // Exchanges the leaders' headers and checks that every process called the
  // same collective; shares the clocks.
  std::vector<Header> exchange_headers(const Header& mine);
  // Sends `send` (this process's payload, announced in headers[me]) to every
  // process and receives theirs: afterwards buffers_[q] holds process q's.
  void gather_payloads(const at::Tensor& send, const std::vector<Header>& headers);

  // Each collective between processes (hierarchical_exchange.cpp): fills in
  // the header's payload, exchanges headers, then the data.
  void lead_all_reduce(const Calls& calls, Header& mine);
  void lead_broadcast(const Calls& calls, Header& mine);
  void lead_all_gather(const Calls& calls, Header& mine);
  bool per_node_blocks(const CollectiveCall& first) const;
  at::Tensor local_part(const Calls& calls, const TensorLayout& layout, bool per_node) const;
  void check_all_reduce_blocks(const std::vector<Header>& headers, int64_t block_bytes, bool per_node) const;
#if EXOGYM_HAVE_NCCL
  // CUDA tensors: reduce on the GPU, then NCCL between processes.
  void lead_all_reduce_nccl(const Calls& calls, Header& mine);
  std::unique_ptr<NcclExchange> nccl_;
#endif

  dist::ProcessMesh& mesh_;
  const int nodes_;
  const dist::NodeBlock block_;
  sim::ClockExchange* clocks_;
  const bool exact_;
  std::vector<int> live_;             // the live nodes (all of them without failures)
  std::vector<int> local_;            // this process's live nodes, as indices into its block
  std::vector<int> live_by_process_;  // how many live nodes each process hosts
  uint64_t sequence_ = 0;             // collectives so far (the leaders' count)
  uint64_t clock_sequence_ = 0;       // the ClockExchange sequence of the current collective

  // Written by the leader, read by every local node once the collective's
  // rendezvous is over (until the next one's leader starts, when every local
  // node has arrived again).
  std::vector<at::Tensor> result_;                 // all_reduce, broadcast
  sdk::SharedTensors shared_result_;               // all_reduce_shared: result_ on the nodes' devices
  std::vector<std::vector<at::Tensor>> gathered_;  // all_gather, by global rank
  std::vector<at::Tensor> buffers_;                // byte buffers the results view

  MeetingPoint meeting_;
  GroupMeetings groups_;
  CrossProcessWaits waits_;  // the heartbeat thread's only
};

}  // namespace exogym::runtime::comm
