#pragma once
// The parent's side of a measurement: each runs in a fresh child process
// (this program again, with --child), so that peak memory and start-up are
// measured alone.
#include <nlohmann/json.hpp>
#include <vector>

#include "bench/options.h"
#include "exogym/runtime/threads/thread_plan.h"

namespace exogym::bench {

// Runs the measurement `spec` (child.h) in a child process and returns its
// JSON. Throws std::runtime_error when the child fails.
nlohmann::json measure(const BenchOptions& options, nlohmann::json spec);

// Of repeated timings, the fastest: other work on the machine (or on a
// virtual machine's host) only ever adds time, so the fastest run is the
// closest to what the code itself costs. Both loops get the same estimator.
double fastest(const std::vector<double>& values);

// How the simulator lays out `nodes` nodes in one process with `parallelism`
// (0: automatic), which the bare loop copies.
runtime::threads::ThreadPlan simulator_threads(int nodes, int parallelism);

}  // namespace exogym::bench
