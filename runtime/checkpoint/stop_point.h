#pragma once
// Where the nodes of a process stop when the run is interrupted (Ctrl-C,
// SIGTERM) and writes checkpoints: all at the same step boundary, so that
// the checkpoint holds the same step of every node. Nodes drift apart
// between synchronising collectives (by up to H steps with DiLoCo), so the
// first node to see the request picks the furthest boundary any node has
// reached, and every node stops there. The others can always get there:
// the furthest node has finished every collective before that boundary,
// which means every node has entered them.
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

  // Node `rank` has reached boundary `step`: whether it stops here.
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
