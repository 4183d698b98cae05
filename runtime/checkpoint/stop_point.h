#pragma once
// Where the nodes of a run stop when it is interrupted (Ctrl-C, SIGTERM)
// and writes checkpoints: all at the same step boundary, so that the
// checkpoint holds the same step of every node.
//
// One process. Nodes drift apart between synchronising collectives (by up
// to H steps with DiLoCo), so the first node to see the request picks the
// nearest boundary no node has passed yet, and every node stops there. A
// node that reached a boundary before the request went on past it (it may
// already be inside the next step's collectives), so the stop is one beyond
// the furthest boundary any other node has reached, or the requesting
// node's own boundary if that is further. Every node can get there: the
// furthest node has entered every collective before it, so the others are
// not waiting on anyone who stopped.
//
// Several processes (shared): no node decides. Each process proposes, from
// a thread that is not a node's (checkpoint/stop_vote.h), one beyond the
// furthest boundary its nodes have reached, without waiting for any node to
// reach a boundary (a node may be blocked in a collective until another
// process moves on). The processes agree on the largest proposal. A node
// goes up to its process's proposal and waits there for the agreement,
// then goes on to the agreed step. Nobody has passed it: every proposal is
// beyond its own process's nodes, and nodes never pass their proposal
// before the agreement.
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace exogym::runtime::checkpoint {

class StopPoint {
 public:
  // Nodes [first, first + count) of this process, starting at boundary
  // `start` (steps completed); `shared`: the run spans several processes.
  StopPoint(int first, int count, int64_t start, bool shared = false);

  enum class Answer {
    Go,    // go on past this boundary, never to come back to it
    Stop,  // stop here
    Wait,  // shared: wait_for_agreement(), then ask again
  };

  // Node `rank` has reached boundary `step`. `requested`: whether a stop was
  // requested (host::interrupt_requested; only one process decides on
  // it). Any node thread.
  Answer at_boundary(int rank, int64_t step, bool requested);

  // Shared. This process's proposal (decided by the first call): one
  // beyond the furthest boundary any of its nodes has reached.
  int64_t propose();
  // The largest proposal of all processes: nodes stop there.
  void agree(int64_t stop);
  // Blocks until agree() or abandon(); whether the agreement came.
  bool wait_for_agreement();
  // The run failed: waits end without an agreement.
  void abandon();

 private:
  std::mutex mutex_;
  std::condition_variable agreed_cv_;
  const int first_;
  const bool shared_;
  std::vector<int64_t> reached_;  // by rank - first
  std::optional<int64_t> stop_;   // one process: the stop; shared: the agreed stop
  std::optional<int64_t> proposal_;
  bool abandoned_ = false;
};

}  // namespace exogym::runtime::checkpoint
