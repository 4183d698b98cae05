#pragma once
// What the collective backends have in common: a node's sdk::Communicator
// turns each call into a CollectiveCall (checked, on contiguous tensors) and
// hands it to the backend, then copies the results back into the caller's
// tensors that were not contiguous.
#include <memory>

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
  // Node `rank`'s part of a collective. Returns once the results are in
  // call.tensors (all_reduce, broadcast) or *call.gathered (all_gather);
  // for call.shared_result, returns the result instead (the same tensors
  // for every node of the process), else null.
  // `slot` (may be null) is released while the node waits for the others.
  virtual sdk::SharedTensors run(int rank, CollectiveCall call, threads::NodeSlot* slot) = 0;
};

// Node `rank`'s communicator over `backend`, which must outlive it.
std::unique_ptr<sdk::Communicator> make_communicator(CollectiveBackend& backend, int rank, threads::NodeSlot* slot);

}  // namespace exogym::runtime::comm
