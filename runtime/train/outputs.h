#pragma once
// Opening a run's outputs, before its nodes start: the run folder with its
// config.json (process 0), the progress line, and the log line announcing
// the run.
#include "exogym/runtime/cluster/thread_plan.h"
#include "exogym/runtime/train/run_state.h"
#include "exogym/runtime/train/training.h"

namespace exogym::runtime::train {

// Sets s.run_dir, s.writer or s.metric_buffer, and s.progress.
void open_outputs(RunState& s, const cluster::ThreadPlan& plan, const RunOptions& options);

}  // namespace exogym::runtime::train
