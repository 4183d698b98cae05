#pragma once
// What the collective backends have in common: a node's sdk::Communicator
// turns each call into a CollectiveCall (checked, on contiguous tensors) and
// hands it to the backend, then copies the results back into the caller's
// tensors that were not contiguous.
#include <memory>
#include <string>
#include <vector>

#include "exogym/runtime/comm/collective_call.h"
#include "exogym/sdk/comm.h"

namespace exogym::runtime::threads {
class NodeSlot;
}

namespace exogym::runtime::comm {

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  // The run's node count: ranks run from 0 to size() - 1.
  virtual int size() const = 0;
  // The nodes taking part in collectives now (the communicators' size):
  // size(), unless nodes are down.
  virtual int live_count() const { return size(); }
  // Those nodes' ranks, ascending.
  virtual const std::vector<int>& live_ranks() const = 0;
  // Node `rank`'s part of a collective. Returns once the results are in
  // call.tensors (all_reduce, broadcast) or *call.gathered (all_gather);
  // for call.shared_result, returns the result instead (the same tensors
  // for every node of the process), else null.
  // `slot` (may be null) is released while the node waits for the others.
  // A call with members (group_all_reduce, group_all_gather, exchange;
  // checked by check_group) meets only them.
  virtual sdk::SharedTensors run(int rank, CollectiveCall call, threads::NodeSlot* slot) = 0;

  // Node `rank` waits in a meeting of every node of the run (Cluster's
  // meet_all) until leave_elsewhere(rank), or has finished its run: a group
  // that waits for it never completes (GroupMeetings::enter_elsewhere).
  virtual void enter_elsewhere(int rank, const std::string& what) = 0;
  virtual void leave_elsewhere(int rank) = 0;
  // From the work of such a meeting, once all of `ranks` have arrived.
  virtual void leave_all_elsewhere(const std::vector<int>& ranks) = 0;
};

// Node `rank`'s communicator over `backend`, which must outlive it.
std::unique_ptr<sdk::Communicator> make_communicator(CollectiveBackend& backend, int rank, threads::NodeSlot* slot);

}  // namespace exogym::runtime::comm
