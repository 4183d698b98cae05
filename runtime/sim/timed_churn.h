#pragma once
// Churn on the simulated clock ("churn": {"mtbf": "2h", "downtime": "10min"}):
// each node without a "faults" entry is up for exponentially distributed
// times of mean `mtbf` seconds and down `downtime` seconds each time, from
// its own stream of the run's seed (as the churn counted in steps,
// fault_schedule.h). Unlike steps, the clock is known only as the run goes:
// the membership of each step is decided at its start, from the cluster's
// time then (train/membership.h). With a fixed compute.step_time (which the
// manifest requires) that time, and so every failure, is reproducible.
#include <cstdint>
#include <random>
#include <vector>

#include "exogym/runtime/sim/failure_spec.h"

namespace exogym::runtime::sim {

class TimedChurn {
 public:
  static constexpr int64_t kMaxDrawsPerStep = 1000000;

  explicit TimedChurn(const FailureSpec& m);

  // Whether node `node` is down at simulated time `time` (seconds). Times
  // asked for must not decrease (the draws are made as the clock goes).
  // sdk::ConfigError at "churn.mtbf" past kMaxDrawsPerStep draws in one call;
  // host::Interrupted when a stop is requested while drawing.
  bool down(int node, double time);
  double downtime() const { return downtime_; }

 private:
  struct NodeDraws {
    bool churns = false;  // no "faults" entry
    std::mt19937_64 rng;
    double down_from = 0, down_to = 0;  // the current or next down time
  };
  double mtbf_, downtime_;
  std::vector<NodeDraws> nodes_;
};

}  // namespace exogym::runtime::sim
