#pragma once
// A run's checkpoints (checkpoint/ holds the format): when to write them,
// what the run folder adds to them, and resuming from one. docs/checkpoints.md
// describes them for users.
#include <cstdint>
#include <filesystem>

#include "exogym/runtime/train/training_state.h"

namespace exogym::runtime::train {

// A resumed run, once s.simulation exists: finds the checkpoint in
// options.run_dir (the newest that loads, or options.from_step), loads this
// process's nodes' states, the run-wide state and the simulated clocks into
// `s`, and checks that it fits this run: the same ABI
// and plugins, and no change to the manifest beyond the fields that may
// change (checkpoint/resume_rules.h). sdk::DataError or sdk::ConfigError
// (exit 2) naming what differs; nothing in the run folder is changed.
void load_resume_point(TrainingState& s, const TrainingOptions& options);

// Process 0 of a resumed run, once it is checked: cuts train.csv,
// validation.csv, metrics.csv and comm.csv back to the checkpoint's step,
// and removes summary.json (written again at the end).
// sdk::DataError naming a CSV shorter than the checkpoint says.
void cut_outputs_to_checkpoint(const TrainingState& s);

// Once the run folder is open (open_outputs): the CSVs cut back to the
// checkpoint (resuming), the writer of checkpoints and the stop point
// (when checkpoint.interval > 0).
void prepare_checkpoints(TrainingState& s);

// Whether the nodes write a checkpoint at boundary `step` (steps done): a
// multiple of checkpoint.interval, or the last step.
bool checkpoint_due(const TrainingState& s, int64_t step);

// Over several processes, one node of each process other than 0, once every
// node of its process is at the checkpoint of `step`: its metric rows so far
// go into the checkpoint's folder, for process 0 to append to metrics.csv.
void hand_over_metrics(TrainingState& s, int64_t step);

// Node 0, once every node's file of `step` is written (and every process's
// metric rows): the index with the run-wide state, then the commit. Returns the checkpoint's folder.
std::filesystem::path commit_checkpoint(TrainingState& s, int64_t step);

}  // namespace exogym::runtime::train
