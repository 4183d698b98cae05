#pragma once
// The manifest's "participation" section (sim/participation.h): how many
// nodes or clients each round draws, from which population, and the
// availability trace; and what a population larger than the nodes does not
// combine with.
#include <nlohmann/json.hpp>
#include <string>

#include "exogym/runtime/manifest/manifest.h"

namespace exogym::runtime::manifest {

// `section` validated against the schema, its trace path already absolute.
// Exactly one of per_round and fraction; clients at least `nodes`; with a
// population, at most `nodes` clients a round; a trace read for the
// clients, on a fixed compute.step_time (its availability is read on the
// simulated clock). Throws sdk::ConfigError naming the field or, for the
// trace, the file and line.
sim::ParticipationSpec read_participation(const nlohmann::json& section, int nodes, const ComputeSpec& compute);

// For a run with a population (Manifest::has_population): refuses faults
// and churn, nodes listed in compute.speed or network.nodes, and
// partitions other than iid and dirichlet (docs/simulation.md#populations-of-clients).
// `top` is the validated manifest.
void check_population(const nlohmann::json& top, const Manifest& m);

// For a run with a trace: the first round, at simulated time 0, finds a
// client available among those alive at step 0 (the scheduled failures
// taken into account), so that a run that cannot draw its first round stops
// here rather than at step 0 with its folder made. sdk::ConfigError at
// "participation.trace" otherwise, naming `file`.
void check_trace_start(const Manifest& m, const std::string& file);

}  // namespace exogym::runtime::manifest
