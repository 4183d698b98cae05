#pragma once
// Where the node threads of one process meet for each collective (not to be
// confused with dist/'s rendezvous of processes). Every node arrives with its
// call; the last to arrive checks that the calls match (the SPMD contract)
// and does the collective's work for all of them while the others sleep,
// then wakes them. Waking a thread is expensive (compute_slots.h), so each
// node wakes once per collective: a node that holds a compute slot gives it
// back and is woken only when the collective is over *and* a slot is its
// again; the last node, running already, takes a slot first and hands the
// free ones to the others in rank order.
//
// No hangs: an abort wakes every waiting node with sdk::AbortedError, and an
// error in the matching or the work aborts the run. A waiting node leaves on
// an abort only once the work under way (if any) is over, since the work
// writes into the node's call (its tensors and its all_gather result, which
// lives in the node's stack frame) and hands the node's compute slot back.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "exogym/runtime/comm/collective_call.h"
#include "exogym/runtime/threads/abort_signal.h"

namespace exogym::runtime::threads {
class NodeSlot;
}

namespace exogym::runtime::comm {

class MeetingPoint {
 public:
  // Every member's call, by index.
  using Calls = std::vector<CollectiveCall>;
  // The collective itself, run by the last node to arrive. It may throw.
  using Work = std::function<void(const Calls& calls)>;

  // `members` nodes, with indices 0 to members-1, whose ranks (in messages)
  // start at `first_rank`.
  MeetingPoint(int members, int first_rank, threads::AbortSignal& abort, Work work);

  // Member `index` arrives with `call` and returns once the collective's
  // work is done, holding a compute slot again if it held one (`slot` may be
  // null). Throws sdk::AbortedError if the run aborts meanwhile; the last
  // node throws sdk::Error for a mismatch or a failed work, after aborting
  // the run so that the others stop too.
  void meet(int index, CollectiveCall call, threads::NodeSlot* slot);

  // The members the next collectives wait for (indices, ascending): the
  // live nodes of a run that simulates failures (none: in a run over
  // several processes, a process whose nodes are all down). Only while no
  // collective is under way (from the work of a meeting of every node).
  void set_expected(std::vector<int> members);

 private:
  bool arrive(int index, CollectiveCall call, threads::NodeSlot* parked, uint64_t& generation);
  void wait(uint64_t generation, threads::NodeSlot* parked);
  // After an abort: blocks until no work is under way (the last node's
  // work and its grant of compute slots), then throws sdk::AbortedError.
  [[noreturn]] void leave_aborted();
  void check_matching() const;
  void work_and_wake(int index, threads::NodeSlot* parked);

  const int first_rank_;
  threads::AbortSignal& abort_;
  const Work work_;
  // The members every collective waits for: all of them, unless nodes are
  // down (set_expected).
  std::vector<int> expected_;
  std::vector<char> is_expected_;  // by index

  std::mutex mutex_;  // guards what follows, and calls_ until the last node arrives
  std::condition_variable cv_;
  Calls calls_;
  std::vector<threads::NodeSlot*> parked_;  // the members that gave a compute slot back to wait
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool working_ = false;  // the last node of this generation is doing the work
};

}  // namespace exogym::runtime::comm
