#pragma once
// Where the node threads of one process meet for collectives over a
// subgroup (group_all_reduce, group_all_gather, exchange: sdk/comm.h). Unlike
// meeting_point.h's rendezvous of every node, only the group's members
// arrive, and groups meet independently of each other: each is keyed by its
// member list, and the n-th meeting of a group joins every member's n-th
// call of it. The last local member to arrive checks the calls and does the
// work (over several processes, the exchange with the other processes'
// members too) while the others wait without a compute slot.
//
// No hangs. Since only members call, the calls of different nodes can
// disagree in ways that would wait forever: node 1 waits for node 2 in a
// group while node 2 waits in a collective over every node (which waits for
// node 1), or has finished its run, or waits in another group for node 3,
// which waits for node 1. The meetings know where every local node waits,
// so the node whose arrival closes such a cycle throws sdk::Error naming
// the nodes and what each waits in, after aborting the run (the others end
// with sdk::AbortedError). Over several processes each process reports
// where its nodes wait (wait_report()), and cross_process_waits.h finds
// the cycles that span processes (docs/plugins.md#subgroups-and-peers).
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "exogym/runtime/comm/collective_call.h"
#include "exogym/runtime/threads/abort_signal.h"

namespace exogym::runtime::threads {
class NodeSlot;
}

namespace exogym::runtime::comm {

class GroupMeetings {
 public:
  // The group's local members' calls, in rank order, and the count of the
  // group's meetings before this one.
  using Work = std::function<void(const std::vector<CollectiveCall*>& calls, uint64_t meeting)>;

  // Nodes `first_rank` to first_rank + count - 1 live in this process.
  GroupMeetings(int first_rank, int count, threads::AbortSignal& abort);

  // Node `rank` arrives with `call` (call.members set; `local`: the members
  // this process hosts, ascending) and returns once the work is done.
  // `slot` (may be null) is given back while it waits. Throws
  // sdk::AbortedError on an abort, sdk::Error for a deadlock, a mismatch
  // or a failed work (after aborting the run).
  void meet(int rank, CollectiveCall call, const std::vector<int>& local, threads::NodeSlot* slot, const Work& work);

  // Node `rank` waits in something that needs every node, or has finished
  // its run (then leave() never comes); `what` says which, as "waits in
  // all_reduce over every live node" or "has finished its run". Throws
  // sdk::Error, after aborting the run, if a group waits for it.
  void enter_elsewhere(int rank, const std::string& what);
  void leave(int rank);
  // From the work of a meeting of every node, once all have arrived:
  // `ranks` wait for nothing any more (a node may still wait for a compute
  // slot before its leave(), and a peer may reach it meanwhile).
  void leave_all(const std::vector<int>& ranks);

  // Where this process's nodes wait now, for the other processes
  // (cross_process_waits.h's format): a line per node waiting in a group
  // (its meeting, members and call) or elsewhere (what it does), with a
  // count of its changes of state, so that a wait seen twice with the same
  // count has lasted between the two looks; and the meetings begun of each
  // group of `interest` that has a member here.
  std::string wait_report(const std::set<std::vector<int>>& interest);

 private:
  struct Meeting {
    std::vector<int> local;               // the members to wait for
    std::map<int, CollectiveCall> calls;  // by rank
    uint64_t count = 0;                   // meetings of this group so far
  };
  enum class State { Running, Waiting, Working, Elsewhere };
  struct Node {
    State state = State::Running;
    const std::vector<int>* group = nullptr;  // Waiting, Working: the key of its meeting
    std::string elsewhere;                    // Elsewhere: what it does
    std::string call;                         // Waiting, Working: its call, described
    uint64_t meeting = 0;                     // Waiting, Working: the group's count of meetings before it
    uint64_t changes = 0;                     // of state, for wait_report()
  };
  void set_state(Node& n, State state) {
    n.state = state;
    ++n.changes;
  }
  Node& node(int rank) { return nodes_[static_cast<size_t>(rank - first_rank_)]; }
  // Under mutex_: the reason a deadlock is, if node `rank`, just arrived at
  // `group`, closes a cycle of waits; empty otherwise.
  std::string find_deadlock(int rank, const std::vector<int>& group);
  std::string find_waiters_for(int rank);
  // Aborts the run and throws `reason` from node `rank`, taking its call
  // out of `group`'s meeting (may be null).
  [[noreturn]] void fail(std::unique_lock<std::mutex>& lock, const std::string& reason, int rank,
                         const std::vector<int>* group);
  void forget(int rank, Meeting& m);
  void run_work(std::unique_lock<std::mutex>& lock, std::vector<int> group, const Work& work);

  const int first_rank_;
  threads::AbortSignal& abort_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Node> nodes_;
  // Every group met so far (its count of meetings); never erased, so that
  // Node::group may point at a key.
  std::map<std::vector<int>, Meeting> meetings_;
  size_t pending_ = 0;  // meetings with a member waiting
};

}  // namespace exogym::runtime::comm
