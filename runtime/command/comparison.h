#pragma once
// The side-by-side summary of a manifest's "runs": one row per variant. With
// "seeds" a variant's runs (one per seed, consecutive in the results) make
// one row: each number is the mean over the seeds ± their sample standard
// deviation (n - 1).
#include <string>
#include <vector>

#include "exogym/runtime/train/training.h"

namespace exogym::runtime::command {

// A fixed-width text table: variant, strategy, nodes, steps, final local and
// global loss and metrics, last train loss, bytes sent per node, simulated
// time, when the target loss was reached (if set), wall time. Over seeds:
// a "seeds" column, "mean ± std" cells, and the target's step and time over
// the seeds that reached it, "(k/n)" when not all did.
std::string comparison_table(const std::vector<train::TrainingResult>& results);

// The same as CSV (written to <name>/comparison.csv). Over seeds each
// number column holds the mean and is followed by <column>_std (empty with
// one seed), and target_reached counts the seeds that reached the target.
std::string comparison_csv(const std::vector<train::TrainingResult>& results);

}  // namespace exogym::runtime::command
