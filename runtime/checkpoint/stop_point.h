#pragma once
// Where the nodes of a process stop when the run is interrupted (Ctrl-C,
// SIGTERM) and writes checkpoints: all at the same step boundary, so that
// the checkpoint holds the same step of every node. Nodes drift apart
// between synchronising collectives (by up to H steps with DiLoCo), so the
// first node to see the request picks the nearest boundary no node has
// passed yet, and every node stops there. A node that reached a boundary
// before the request went on past it (it may already be inside the next
// step's collectives), so the stop is one beyond the furthest boundary any
// other node has reached, or the requesting node's own boundary if that is
// further. Every node can get there: the furthest node has entered every
// collective before it, so the others are not waiting on anyone who stopped.
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace exogym::runtime::checkpoint {

class StopPoint {
 public:
  // Nodes [first, first + count) of this process, starting at boundary
  // `start` (steps completed).
  StopPoint(int first, int count, int64_t start);

  // Node `rank` has reached boundary `step`: whether it stops here. A node
  // told no continues past `step` and never comes back to it.
  // `requested`: whether a stop was requested (cluster::interrupt_requested).
  // Any node thread.
  bool stop_here(int rank, int64_t step, bool requested);

 private:
  std::mutex mutex_;
  const int first_;
  std::vector<int64_t> reached_;  // by rank - first
  std::optional<int64_t> stop_;
};

}  // namespace exogym::runtime::checkpoint
