#pragma once
// The simulated cluster: one thread per virtual node, compute slots, the
// collective backend, and clean abort. If any node throws, every collective
// in flight fails, all threads end, and run() rethrows the first error.
//
// In a run spread over several processes, a Cluster runs this process's
// block of nodes, and its collectives reach the other processes' nodes
// through a ProcessMesh (hierarchical_group.h). A failure on either side
// stops both: a node error here fails the mesh (the other processes stop
// and report it), a lost peer aborts the nodes here.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exogym/runtime/comm/inprocess_group.h"
#include "exogym/runtime/dist/world.h"
#include "exogym/runtime/threads/abort_signal.h"
#include "exogym/runtime/threads/compute_slots.h"

namespace exogym::runtime::comm {
class HierarchicalGroup;
}
namespace exogym::runtime::dist {
class ProcessMesh;
}
namespace exogym::runtime::sim {
class ClockExchange;
}

namespace exogym::runtime::train {

class Cluster {
 public:
  // parallelism: how many nodes compute at once (>= 1); `clocks` (may be
  // null): where subgroups' members compare arrival times.
  Cluster(int nodes, int parallelism, sim::ClockExchange* clocks = nullptr);
  // This process hosts `block` of the run's `nodes`; the others are reached
  // through `mesh`. `clocks` (may be null) shares arrival times between
  // processes; `exact_reduce`: see HierarchicalGroup.
  Cluster(int nodes, int parallelism, dist::ProcessMesh& mesh, dist::NodeBlock block, sim::ClockExchange* clocks,
          bool exact_reduce);
  ~Cluster();

  int nodes() const { return nodes_; }
  // The nodes this process runs (all of them without a mesh).
  const dist::NodeBlock& block() const { return block_; }
  int parallelism() const { return slots_.capacity(); }
  threads::AbortSignal& abort_signal() { return abort_; }
  // The in-process backend (single-process clusters only).
  comm::InProcessGroup& group();
  threads::ComputeSlots& slots() { return slots_; }

  // The collective backend node `rank` uses; `slot` is released while it waits.
  std::unique_ptr<sdk::Communicator> communicator(int rank, threads::NodeSlot* slot);

  // Every node of the run meets here, whether it is alive or down (a run
  // that simulates failures: membership changes, checkpoints). In each
  // process the last node to arrive runs `work` (every node passes the
  // same) while the others wait, then, over several processes, waits for
  // every process to have done so; `slot` is released while waiting.
  void meet_all(int rank, threads::NodeSlot* slot, std::function<void()> work = {});

  // The nodes that take part in collectives from now on (ascending): from
  // a meeting's work. Listeners (add_members_listener) hear of it there.
  void set_members(std::vector<int> live);
  // Before the nodes start: `listener` is called with every new set of
  // members (stacked execution waits for the live nodes of its stack).
  void add_members_listener(std::function<void(const std::vector<int>& live)> listener);

  // Node `rank` waits for something other than a collective that needs
  // other nodes of this process (its stack's forward: node_stacks.h): a
  // subgroup that waits for it meanwhile never completes (group_meetings.h).
  // The wait's work ends it for every node that waited, before waking them.
  void enter_elsewhere(int rank, const std::string& what);
  void leave_all_elsewhere(const std::vector<int>& ranks);

  // Runs body(rank, slot) on one thread per local node and waits for all.
  // The body starts without a slot; it acquires one before computing.
  void run(const std::function<void(int rank, threads::NodeSlot& slot)>& body);

 private:
  void start_meetings();
  comm::CollectiveBackend& backend();

  int nodes_;
  dist::NodeBlock block_;
  threads::AbortSignal abort_;
  threads::ComputeSlots slots_;
  std::unique_ptr<comm::InProcessGroup> group_;
  std::unique_ptr<comm::MeetingPoint> everyone_;     // meet_all: this process's nodes
  std::vector<std::function<void()>> meeting_work_;  // by index in the block
  std::vector<std::function<void(const std::vector<int>&)>> members_listeners_;
  std::unique_ptr<comm::HierarchicalGroup> hierarchical_;
  dist::ProcessMesh* mesh_ = nullptr;
};

}  // namespace exogym::runtime::train
