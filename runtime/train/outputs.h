#pragma once
// Opening a run's outputs, before its nodes start: the run folder with its
// config.json (process 0), the progress line, and the log line announcing
// the run.
#include "exogym/runtime/cluster/thread_plan.h"
#include "exogym/runtime/train/run_state.h"
#include "exogym/runtime/train/training.h"

namespace exogym::runtime::train {

// Sets s.run_dir (process 0: options.run_dir, or a fresh folder; a resumed
// run's in every process) and s.config, what config.json will hold. Creates
// nothing.
void choose_run_folder(RunState& s, const cluster::ThreadPlan& plan, const RunOptions& options);

// Sets s.writer or s.metric_buffer, and s.progress; writes config.json. A
// resumed run's CSVs are cut back to its checkpoint and continued.
void open_outputs(RunState& s, const RunOptions& options);

}  // namespace exogym::runtime::train
