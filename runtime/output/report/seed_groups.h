#pragma once
// One variant run over several seeds ("seeds" in a manifest, or runs that
// exogym-report is given) is shown as one run: its curves the mean over the
// seeds with a band of ±1 sample standard deviation, its numbers mean ± std.
#include <vector>

#include "exogym/runtime/output/report/finished_run.h"

namespace exogym::runtime::output::report {

// Merges the runs that are one variant over several seeds: the same label,
// the same config.json but for "seed" (and where and how the run ran:
// output.dir, runtime), and distinct seeds. The merged run stands where its
// first seed stood; the others keep their order. Curves are averaged row by
// row (the same step in each seed's file) up to the shortest seed's; numbers
// of summary.json are averaged when every seed finished. The merged config
// lists "seeds" instead of "seed".
std::vector<FinishedRun> merge_seeds(std::vector<FinishedRun> runs);

}  // namespace exogym::runtime::output::report
