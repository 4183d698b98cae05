#pragma once
// The performance targets the benchmark checks, from the sections' rows
// (report keys "overhead" and "node_sweep", when measured).
#include <nlohmann/json.hpp>

#include "bench/options.h"

namespace exogym::bench {

// Prints each target as met or MISSED and returns them as JSON. The memory
// target measures a run of its own; `dataset` is dataset_bytes().
nlohmann::json check_targets(const BenchOptions& options, const nlohmann::json& report, double dataset);

}  // namespace exogym::bench
