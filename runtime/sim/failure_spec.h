#pragma once
// What the failures of a run are built from (fault_schedule.h,
// timed_churn.h): the manifest's "faults" and "churn", with the run's size
// and seed. The manifest reads them (manifest/reader.cpp); sim/ needs no more
// of the manifest than this.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace exogym::runtime::sim {

// One entry of "faults": a node that fails (and maybe rejoins), or joins
// late. Steps are 0-based: failing at step s, the node does not take step s.
struct NodeFault {
  int node = 0;
  std::optional<int64_t> fail_at, rejoin_at, join_at;
  std::string path;  // "faults[2]", for error messages
};

// "churn": every node without a "faults" entry fails independently, its up
// times exponentially distributed with mean `mtbf`, and is down `downtime`
// each time: counted in steps (fault_schedule.h), or with `timed` in seconds
// of the simulated clock (timed_churn.h).
struct ChurnSpec {
  bool timed = false;
  double mtbf = 0;
  double downtime = 0;  // a whole number of steps, unless timed
};

struct FailureSpec {
  int nodes = 0;
  int64_t max_steps = 0;
  uint64_t seed = 0;  // the run's: each node's churn stream mixes it with the rank
  std::vector<NodeFault> faults;
  std::optional<ChurnSpec> churn;
};

}  // namespace exogym::runtime::sim
