#include "exogym/runtime/sim/fault_schedule.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "exogym/sdk/error.h"

namespace exogym::runtime::sim {

namespace {

using sdk::ConfigError;

std::string step_text(int64_t step) { return "step " + std::to_string(step); }

}  // namespace

uint64_t churn_seed(uint64_t run_seed, int node) {
  uint64_t z = run_seed ^ (0x4348555240000000ULL + static_cast<uint64_t>(node) * 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double exponential(std::mt19937_64& rng, double mean) {
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1)
  return -mean * std::log1p(-u);
}

FaultSchedule::FaultSchedule(int nodes, int64_t max_steps) : nodes_(nodes), max_steps_(max_steps), down_(nodes) {}

FaultSchedule::FaultSchedule(const FailureSpec& m) : FaultSchedule(m.nodes, m.max_steps) {
  const std::string last = " (train.max_steps is " + std::to_string(max_steps_) + ": the last step is " +
                           std::to_string(max_steps_ - 1) + ")";
  std::vector<bool> scheduled(nodes_, false);
  for (const NodeFault& f : m.faults) {
    if (f.node >= nodes_) {
      throw ConfigError(f.path + ".node", "node " + std::to_string(f.node) +
                                              " is not a node of the run: nodes run "
                                              "from 0 to " +
                                              std::to_string(nodes_ - 1));
    }
    scheduled[f.node] = true;
    Down down;
    down.path = f.path;
    if (f.join_at) {
      if (f.fail_at || f.rejoin_at) {
        throw ConfigError(f.path,
                          "join_at describes a late joiner: give it alone, and the node's later failures "
                          "in entries of their own");
      }
      if (*f.join_at >= max_steps_)
        throw ConfigError(f.path + ".join_at", step_text(*f.join_at) + " is past the run" + last);
      down.from = 0;
      down.to = *f.join_at;
      down.late_join = true;
    } else {
      if (!f.fail_at) throw ConfigError(f.path, "give fail_at (the step the node fails at) or join_at (a late joiner)");
      if (*f.fail_at >= max_steps_)
        throw ConfigError(f.path + ".fail_at", step_text(*f.fail_at) + " is past the run" + last);
      down.from = *f.fail_at;
      down.to = max_steps_;
      down.forever = !f.rejoin_at;
      if (f.rejoin_at) {
        if (*f.rejoin_at <= *f.fail_at) {
          throw ConfigError(f.path + ".rejoin_at", "the node rejoins at " + step_text(*f.rejoin_at) +
                                                       ", which is not after it fails (fail_at " +
                                                       std::to_string(*f.fail_at) + ")");
        }
        if (*f.rejoin_at >= max_steps_) {
          throw ConfigError(f.path + ".rejoin_at",
                            step_text(*f.rejoin_at) + " is past the run" + last + "; null: the node never comes back");
        }
        down.to = *f.rejoin_at;
      }
    }
    add(f.node, down);
  }
  if (m.churn && !m.churn->timed) {
    for (int node = 0; node < nodes_; ++node) {
      if (scheduled[node]) continue;
      std::mt19937_64 rng(churn_seed(m.seed, node));
      // Up from `up`; the failure comes after the up time's whole steps, at
      // least one step later (a node that rejoins takes part in its first step).
      int64_t up = 0;
      while (true) {
        const double gap = std::floor(exponential(rng, m.churn->mtbf));
        const int64_t fail =
            up + std::max<int64_t>(1, gap >= static_cast<double>(max_steps_) ? max_steps_ : static_cast<int64_t>(gap));
        if (fail >= max_steps_) break;
        Down down;
        down.from = fail;
        down.to = fail + static_cast<int64_t>(m.churn->downtime);
        down.path = "churn";
        add(node, down);
        up = down.to;
      }
    }
  }
  index_changes();
  check_alive_and_recoverable(m.churn && !m.churn->timed ? "churn" : "faults");
}

void FaultSchedule::add(int node, Down down) {
  auto& list = down_[node];
  for (const Down& other : list) {
    // Touching intervals overlap too: a node cannot come back and fail at once.
    if (down.from <= other.to && other.from <= down.to) {
      const Down& later = down.from >= other.from ? down : other;
      const Down& earlier = down.from >= other.from ? other : down;
      if (later.from == earlier.to) {
        throw ConfigError(later.path, "node " + std::to_string(node) + " fails at " + step_text(later.from) +
                                          ", the step " + earlier.path +
                                          " brings it back at: give one entry for the whole time it is down");
      }
      const std::string until = earlier.forever ? " for good" : " until " + step_text(earlier.to);
      throw ConfigError(later.path, "node " + std::to_string(node) + " is down already at " + step_text(later.from) +
                                        ": " + earlier.path + " takes it down from " + step_text(earlier.from) + until);
    }
  }
  list.insert(
      std::upper_bound(list.begin(), list.end(), down, [](const Down& a, const Down& b) { return a.from < b.from; }),
      down);
}

void FaultSchedule::index_changes() {
  changes_.clear();
  for (int node = 0; node < nodes_; ++node) {
    for (const Down& d : down_[node]) {
      changes_[d.from].fails.push_back(node);
      if (d.to < max_steps_) changes_[d.to].returns.push_back(node);
    }
  }
}

// One sweep over the changes, in step order (a churn of thousands of nodes
// has thousands of change steps: no pass over the nodes per change).
// One sweep over the changes, in step order (a churn of thousands of nodes
// has thousands of change steps: no pass over the nodes per change).
void FaultSchedule::check_alive_and_recoverable(const std::string& where) const {
  int64_t alive = nodes_;  // before step 0, every node
  for (const auto& [step, change] : changes_) {
    const int64_t survivors = alive - static_cast<int64_t>(change.fails.size());
    if (!change.returns.empty() && survivors == 0) {
      throw ConfigError(where, "at " + step_text(step) +
                                   " nodes come back while every node alive before fails: nobody is left to "
                                   "give them the run's state");
    }
    alive = survivors + static_cast<int64_t>(change.returns.size());
    if (alive == 0) {
      throw ConfigError(where,
                        "no node is alive at " + step_text(step) + ": the run needs at least one node at every step");
    }
  }
}

const FaultSchedule::Change* FaultSchedule::change_at(int64_t step) const {
  auto it = changes_.find(step);
  return it == changes_.end() ? nullptr : &it->second;
}

bool FaultSchedule::joins_late(int node, int64_t step) const {
  return !down_[node].empty() && down_[node].front().late_join && down_[node].front().to == step;
}

bool FaultSchedule::live(int node, int64_t step) const {
  if (step < 0) return true;
  for (const Down& d : down_[node]) {
    if (step < d.from) return true;
    if (step < d.to) return false;
  }
  return true;
}

std::vector<int> FaultSchedule::live_at(int64_t step) const {
  std::vector<int> out;
  out.reserve(nodes_);
  for (int node = 0; node < nodes_; ++node) {
    if (live(node, step)) out.push_back(node);
  }
  return out;
}

std::optional<int64_t> FaultSchedule::back_at(int node, int64_t step) const {
  for (const Down& d : down_[node]) {
    if (d.from <= step && step < d.to) return d.forever ? std::nullopt : std::optional<int64_t>(d.to);
  }
  return step;
}

}  // namespace exogym::runtime::sim
