#pragma once
// Where each node's simulated time went: compute, communication and waiting
// for slower nodes (summary.json's communication.per_node), as stacked bars
// on one time axis for every run, so runs compare at a glance.
#include <string>
#include <vector>

#include "exogym/runtime/output/report/finished_run.h"

namespace exogym::runtime::output::report {

// Nodes drawn per run; a larger cluster shows its first nodes and says so.
inline constexpr int kMaxNodesDrawn = 16;

// One <svg class="time-split">, or an explanation when no run finished.
std::string time_split_svg(const std::vector<FinishedRun>& runs);

}  // namespace exogym::runtime::output::report
