#pragma once
// exogym-bench's parent process: every section asked for, the targets, and
// the JSON report.
#include "bench/options.h"

namespace exogym::bench {

// Returns the exit status.
int run_benchmark(const BenchOptions& options);

}  // namespace exogym::bench
