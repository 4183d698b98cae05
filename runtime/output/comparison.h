#pragma once
// The side-by-side summary of a manifest's "runs": one row per variant.
#include <string>
#include <vector>

#include "exogym/runtime/train/training.h"

namespace exogym::runtime::output {

// A fixed-width text table: variant, strategy, nodes, steps, final local and
// global loss and metrics, last train loss, bytes sent per node, simulated
// time, when the target loss was reached (if set), wall time.
std::string comparison_table(const std::vector<train::RunResult>& results);

// The same as CSV (written to <name>/comparison.csv).
std::string comparison_csv(const std::vector<train::RunResult>& results);

}  // namespace exogym::runtime::output
