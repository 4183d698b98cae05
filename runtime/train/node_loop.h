#pragma once
// The nodes' training loop: one thread per node of this process, each
// running the initial broadcast, the training steps with their evaluations,
// and the final averaging into model.pt (node_run.h).
#include "exogym/runtime/threads/thread_plan.h"

namespace exogym::runtime::train {

struct TrainingState;

// Runs this process's nodes on a simulated cluster laid out by `plan` and
// returns when all have finished. It takes the whole state: the nodes work
// on every part of the run. `exact_reduce`: see HierarchicalGroup.
// Throws sdk::Error naming the node, the step and what it was doing (the
// plugin included) when a node fails.
void run_nodes(TrainingState& s, const threads::ThreadPlan& plan, bool exact_reduce);

}  // namespace exogym::runtime::train
