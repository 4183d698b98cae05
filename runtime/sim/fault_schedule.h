#pragma once
// When each node of a run is down (docs/simulation.md#failures-and-churn).
//
// The schedule is fixed before training, from the manifest's "faults" and
// "churn" and the run's seed: every process and thread computes the same
// one, a resumed run recomputes it, and no node has to tell another that it
// failed. A node is down over half-open step intervals [from, to): failing at
// step s it takes no part in step s; rejoining at step r it takes part in
// step r again. A late joiner is down over [0, join_at).
//
// Churn counted in steps (churn on the simulated clock is timed_churn.h's):
// each node without a "faults" entry draws its up times from an
// exponential distribution with mean `mtbf` steps (a stream of its own,
// seeded by the run's seed and its rank, so the draws do not depend on the
// node count, the parallelism or the process count) and stays down
// `downtime` steps each time.
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "exogym/runtime/sim/failure_spec.h"

namespace exogym::runtime::sim {

// The churn stream of node `node`: the run's seed and the rank mixed
// (SplitMix64's finaliser), so that every node's draws are its own.
uint64_t churn_seed(uint64_t run_seed, int node);
// An exponential draw with mean `mean`, by inversion of a 53-bit uniform
// (std::exponential_distribution's algorithm is the library's own choice,
// so its draws could change with the compiler; these cannot).
double exponential(std::mt19937_64& rng, double mean);

class FaultSchedule {
 public:
  // Nobody fails.
  FaultSchedule(int nodes, int64_t max_steps);
  // The manifest's schedule (Manifest::failure_spec()). Throws sdk::ConfigError naming the entry at
  // fault: a node out of range, rejoin_at not after fail_at, fail_at and
  // join_at together, a node failing while it is down already, a step past
  // the run's last, no node alive at some step, or nodes rejoining at a step
  // where every node that was alive fails (nobody to receive the state from).
  explicit FaultSchedule(const FailureSpec& m);

  int nodes() const { return nodes_; }
  // Whether any node is ever down.
  bool any() const { return !changes_.empty(); }

  // The membership change at a step: the nodes that fail there and those
  // that come back (rejoin or join late), each in rank order.
  struct Change {
    std::vector<int> fails, returns;
  };
  // The change at `step`, or null when its membership is the step before's.
  const Change* change_at(int64_t step) const;
  // Every change, by step.
  const std::map<int64_t, Change>& changes() const { return changes_; }

  bool live(int node, int64_t step) const;
  // The nodes alive at `step`, in rank order. Before step 0 (step -1) every
  // node is alive: every node takes part in the set-up.
  std::vector<int> live_at(int64_t step) const;
  // Whether the membership of `step` differs from the one of step - 1.
  bool changes_at(int64_t step) const { return changes_.count(step) > 0; }
  // Whether node `node` comes back at `step` for the first time (a late joiner).
  bool joins_late(int node, int64_t step) const;
  bool late_joiner(int node) const { return !down_[node].empty() && down_[node].front().late_join; }
  // The step node `node`, down at `step`, comes back at; nullopt: never.
  std::optional<int64_t> back_at(int node, int64_t step) const;

 private:
  struct Down {
    // [from, to): back at `to` if it is a step of the run. Churn's `to` may
    // lie past the run's end, so that a run stopped early and resumed
    // further has the same schedule.
    int64_t from = 0, to = 0;
    bool forever = false;    // a "faults" entry without rejoin_at
    bool late_join = false;  // down from the start: a late joiner
    std::string path;        // the "faults" entry, or "churn"
  };
  void add(int node, Down down);
  void index_changes();
  void check_alive_and_recoverable(const std::string& where) const;

  int nodes_;
  int64_t max_steps_;
  std::vector<std::vector<Down>> down_;  // per node, sorted, disjoint
  std::map<int64_t, Change> changes_;    // by step: the steps whose membership differs from the step before
};

}  // namespace exogym::runtime::sim
