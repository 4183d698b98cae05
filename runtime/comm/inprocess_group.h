#pragma once
// The in-process collective backend: K node threads meet at a rendezvous for
// every collective. The last node to arrive does the collective's work (with
// the group's work crew), then wakes the others as compute slots allow: one
// wake-up per node and collective, since waking a thread is expensive
// (meeting_point.h). Reductions combine ranks in rank order, element by element,
// so results are bit-identical for any thread scheduling, `parallelism` or
// work split.
//
// While nodes are down (a run that simulates failures), collectives run over
// the live nodes only: sums and averages over them, all_gather returns their
// tensors in rank order, a broadcast's root must be one of them.
//
// Collectives over a subgroup meet only its members (group_meetings.h).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "exogym/runtime/comm/collective_backend.h"
#include "exogym/runtime/comm/group_meetings.h"
#include "exogym/runtime/comm/meeting_point.h"
#include "exogym/runtime/threads/abort_signal.h"
#include "exogym/runtime/threads/work_crew.h"
#include "exogym/sdk/comm.h"

namespace exogym::runtime::sim {
class ClockExchange;
}

namespace exogym::runtime::comm {

class InProcessGroup final : public CollectiveBackend {
 public:
  // `helpers`: threads that join the last node in a collective's work
  // (parallelism − 1 keeps the run within its compute slots).
  // `clocks` (may be null): where subgroups' members compare arrivals.
  InProcessGroup(int size, threads::AbortSignal& abort, int helpers = 0, sim::ClockExchange* clocks = nullptr);
  int size() const override { return size_; }
  int live_count() const override { return static_cast<int>(members_.size()); }
  const std::vector<int>& live_ranks() const override { return members_; }
  void enter_elsewhere(int rank, const std::string& what) override { groups_.enter_elsewhere(rank, what); }
  void leave_elsewhere(int rank) override { groups_.leave(rank); }
  void leave_all_elsewhere(const std::vector<int>& ranks) override { groups_.leave_all(ranks); }

  // The nodes the next collectives run over (ranks, ascending). Only while
  // no collective is under way: from the work of Cluster::meet_all.
  void set_members(std::vector<int> members);

  // The communicator node `rank` uses. `slot` (may be null) is released while
  // the node waits for the others.
  std::unique_ptr<sdk::Communicator> communicator(int rank, threads::NodeSlot* slot = nullptr);

  sdk::SharedTensors run(int rank, CollectiveCall call, threads::NodeSlot* slot) override;

 private:
  // The last node's part: every node has posted its call.
  void execute(const MeetingPoint::Calls& calls);
  // Reduces elements [start, end) of tensor `tensor` into `out`
  // (all_reduce_shared's result), or in place into every member's tensor if
  // `out` is undefined.
  void reduce_chunk(const MeetingPoint::Calls& calls, size_t tensor, int64_t start, int64_t end,
                    const at::Tensor& out) const;

  const int size_;
  std::vector<int> members_;  // the live ranks
  threads::AbortSignal& abort_;
  threads::WorkCrew crew_;
  MeetingPoint meeting_;
  GroupMeetings groups_;
  sim::ClockExchange* clocks_;
  // The last all_reduce_shared's result, which every node takes once the
  // collective is over (before any node can start the next one).
  sdk::SharedTensors shared_result_;
};

}  // namespace exogym::runtime::comm
