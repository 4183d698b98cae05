#pragma once
// Which nodes of a run are alive, step by step, when the run simulates
// failures (docs/simulation.md#failures-and-churn), and the recovery of the
// nodes that come back.
//
// The schedule (sim/fault_schedule.h) is fixed before training, so every
// node knows when the membership changes. Before such a step every node of
// the run, alive or down, meets (Cluster::meet_all); the last to arrive
// moves the run to the new membership (advance()): the collectives' members,
// the events.csv rows, the survivors' failure timeout, the clocks of the
// nodes that come back. Between two changes nothing is shared but the live
// list the node contexts point to, which only advance() writes while every
// node waits.
//
// Recovery: before the meeting, the donor (the lowest rank alive before and
// after the step) puts a copy of its recovery state in the mailbox
// (deposit()); after it, each node that comes back loads it (delivered())
// and says so (loaded()); the last one frees it.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/sim/fault_schedule.h"
#include "exogym/runtime/train/run_result.h"
#include "exogym/sdk/strategy.h"

namespace exogym::runtime::comm {
class InProcessGroup;
}
namespace exogym::runtime::output {
class RunWriter;
}

namespace exogym::runtime::train {

class Simulation;

class Membership {
 public:
  // A run that starts (or resumes) at `first_step`. Until the first meeting
  // every node is alive: every node takes part in the set-up.
  Membership(const manifest::Manifest& m, int64_t first_step);

  // Whether the run simulates failures (has "faults" or "churn"), even if
  // no node happens to fail.
  bool simulated() const { return simulated_; }
  const sim::FaultSchedule& schedule() const { return schedule_; }

  // The live nodes now, in rank order, and the number of changes so far.
  const std::vector<int>& live() const { return live_; }
  int64_t epoch() const { return epoch_; }
  bool is_live(int rank) const { return live_flags_[rank] != 0; }
  // The node that writes train.csv and validation.csv and saves the model:
  // the lowest live rank ("local" is its model).
  int reporter() const { return live_.front(); }

  // Whether every node meets before step `step`: its membership changes,
  // or a resumed run's first step finds nodes down.
  bool meets_before(int64_t step) const;
  // The node that gives its state to the nodes coming back at `step`, or -1
  // when none comes back.
  int donor_at(int64_t step) const;
  // Whether node `rank` comes back at `step`.
  bool returns_at(int rank, int64_t step) const;

  // On the donor's thread, before the meeting: a copy of its recovery state.
  void deposit(sdk::StateDict state);
  // The meeting's work, by the last node to arrive while every node waits.
  void advance(int64_t step, Simulation& simulation, comm::InProcessGroup& group, output::RunWriter* writer);
  // After the meeting, on the thread of a node that came back.
  std::shared_ptr<const sdk::StateDict> delivered() const;
  void loaded();

  // The examples trained by all nodes in steps [0, step), for train.csv:
  // call once per step, in order, from the reporting node.
  int64_t count_step(int64_t step, int64_t batch_size);

  // For summary.json ("faults") and checkpoints.
  FaultTotals totals(int64_t steps_done) const;
  nlohmann::json checkpoint_state() const;
  void restore(const nlohmann::json& state);

 private:
  void set_live(std::vector<int> live);

  const bool simulated_;
  const sim::FaultSchedule schedule_;
  const int64_t first_step_;
  const double failure_timeout_;
  std::map<int64_t, int> donors_;  // by step: the steps where nodes come back
  bool resume_meeting_ = false;    // a resumed run's first step finds nodes down

  std::vector<int> live_;
  std::vector<char> live_flags_;  // by rank
  int64_t epoch_ = 0;

  mutable std::mutex mailbox_mutex_;
  std::shared_ptr<sdk::StateDict> deposit_;
  std::shared_ptr<const sdk::StateDict> delivered_;
  int pending_loads_ = 0;

  int64_t node_steps_ = 0;  // node-steps taken before the last counted step
  int64_t counted_to_ = 0;
  int64_t failures_ = 0, rejoins_ = 0, joins_ = 0;
  double recovery_bytes_ = 0, recovery_seconds_ = 0;
};

}  // namespace exogym::runtime::train
