#include "exogym/runtime/sim/timed_churn.h"

#include <string>

#include "exogym/runtime/host/interrupt.h"
#include "exogym/runtime/sim/fault_schedule.h"
#include "exogym/runtime/util/units.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::sim {

TimedChurn::TimedChurn(const FailureSpec& m)
    : mtbf_(m.churn ? m.churn->mtbf : 0), downtime_(m.churn ? m.churn->downtime : 0), nodes_(m.nodes) {
  std::vector<bool> scheduled(nodes_.size(), false);
  for (const auto& f : m.faults) scheduled[f.node] = true;
  for (size_t node = 0; node < nodes_.size(); ++node) {
    NodeDraws& n = nodes_[node];
    n.churns = m.churn && m.churn->timed && !scheduled[node];
    if (!n.churns) continue;
    n.rng.seed(churn_seed(m.seed, static_cast<int>(node)));
    n.down_from = exponential(n.rng, mtbf_);
    n.down_to = n.down_from + downtime_;
  }
}

bool TimedChurn::down(int node, double time) {
  NodeDraws& n = nodes_[node];
  if (!n.churns) return false;
  // Past the down time: the next up time starts when it ended. The manifest
  // keeps mtbf at least a step, but one step's clock may still jump far (a
  // huge latency): the draws are bounded, and a signal is heeded between
  // them, so that no step spins for minutes out of the user's reach.
  for (int64_t draws = 0; time >= n.down_to; ++draws) {
    if (draws % 4096 == 4095 && host::interrupt_requested())
      throw host::Interrupted("interrupted by a signal while drawing the failures of churn");
    if (draws == kMaxDrawsPerStep) {
      throw sdk::ConfigError("churn.mtbf", util::format_duration(mtbf_) + " draws more than " +
                                               std::to_string(kMaxDrawsPerStep) + " failures of node " +
                                               std::to_string(node) + " in one step (simulated time " +
                                               util::format_duration(time) + "); give a longer mtbf");
    }
    n.down_from = n.down_to + exponential(n.rng, mtbf_);
    n.down_to = n.down_from + downtime_;
  }
  return time >= n.down_from;
}

}  // namespace exogym::runtime::sim
