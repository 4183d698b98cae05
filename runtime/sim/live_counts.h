#pragma once
// How many nodes a step of a run can have live (sdk::NodeContext::live_counts):
// what a strategy checks an option that needs some number of nodes against
// at init(), so that a run that would fail at some step stops before
// training (Krum with too few nodes in an average, say).
//
// Known before training from the nodes, the scheduled faults counted in
// steps (fault_schedule.h) and participation's draws, which depend on the
// seed and the nodes alive alone: a round's draw, and within a round the
// drawn nodes still alive after each scheduled failure, replayed for the
// rounds a failure falls inside. Churn on the simulated clock and
// availability traces decide as the run goes and are not counted.
#include <cstdint>
#include <optional>
#include <vector>

#include "exogym/runtime/sim/fault_schedule.h"
#include "exogym/runtime/sim/participation.h"

namespace exogym::runtime::sim {

// The counts of steps 0 to max_steps - 1, sorted, each once. `round_steps`:
// participation's round (unused without it).
std::vector<int> live_counts(const FaultSchedule& schedule, int64_t max_steps,
                             const std::optional<ParticipationSpec>& participation, int64_t round_steps, uint64_t seed);

}  // namespace exogym::runtime::sim
