#pragma once
// A run's outputs: opening them before its nodes start (the run folder with
// its config.json on process 0, the progress line, the log line announcing
// the run), and report.html once it ended.
#include "exogym/runtime/threads/thread_plan.h"
#include "exogym/runtime/train/training.h"

namespace exogym::runtime::train {

struct CheckpointState;
struct RunContext;
struct TrainingOutputs;
struct TrainingSetup;

// Sets outputs.run_dir (process 0: options.run_dir, or a fresh folder it
// claims with mkdir; a resumed run's in every process) and outputs.config,
// what config.json will hold (the manifest resolved with `setup`'s plugin
// and data options, and `plan`).
void choose_run_folder(const RunContext& run, const TrainingSetup& setup, TrainingOutputs& outputs,
                       const threads::ThreadPlan& plan, const TrainingOptions& options);

// Sets outputs.writer or outputs.metric_buffer and outputs.relay, and
// outputs.progress; writes config.json and data.csv. A resumed run's
// (`checkpoints`) CSVs are cut back to its checkpoint and continued.
void open_outputs(const RunContext& run, const TrainingSetup& setup, const CheckpointState& checkpoints,
                  TrainingOutputs& outputs, const TrainingOptions& options);

// report.html in the run folder, drawn from the folder's files (so a
// resumed run or exogym-report draws the same), on the process that writes
// the folder. Throws sdk::Error naming the file when it cannot be written.
void write_run_report(const RunContext& run, const TrainingOutputs& outputs);

// After the run failed or was interrupted before every node of this
// process finished its strategy's init() (`nodes_started` of them did):
// removes the folder a fresh run made (config.json and empty CSVs, nothing
// trained), so that failed attempts leave no <name>-N behind and the next
// one takes the name. Returns whether it did; a resumed run's folder is
// never removed.
bool remove_untrained_run_folder(const RunContext& run, TrainingOutputs& outputs, int nodes_started,
                                 const TrainingOptions& options) noexcept;

// report.html after the run failed or was interrupted, with what the
// files reached. Never throws: a report that cannot be written is logged, and the
// run's own error is what the user sees.
void write_stopped_run_report(const RunContext& run, TrainingOutputs& outputs) noexcept;

}  // namespace exogym::runtime::train
