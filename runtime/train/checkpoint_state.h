#pragma once
// A run's checkpoints (checkpointing.h): where a resumed run starts and
// what it resumes from, and with checkpoint.interval > 0 the writer, where
// the nodes stop on Ctrl-C, the index fields every checkpoint shares and
// node 0's counts for the result.
#include <cstdint>
#include <memory>
#include <optional>

#include "exogym/runtime/checkpoint/checkpoint_index.h"
#include "exogym/runtime/checkpoint/checkpoint_reader.h"
#include "exogym/runtime/checkpoint/checkpoint_writer.h"
#include "exogym/runtime/checkpoint/stop_point.h"

namespace exogym::runtime::train {

struct CheckpointState {
  // A resumed run starts at first_step, from `resume` (each node's state is
  // dropped once restored).
  int64_t first_step = 0;
  std::optional<checkpoint::LoadedCheckpoint> resume;
  // When checkpoint.interval > 0: the writer, and where nodes stop on Ctrl-C
  // (one process only).
  std::unique_ptr<checkpoint::CheckpointWriter> writer;
  std::unique_ptr<checkpoint::StopPoint> stop_point;
  checkpoint::CheckpointIndex index;
  // Written by node 0 only (TrainingResult::checkpoints, ...).
  int64_t written = 0;
  double seconds = 0, bytes = 0;
};

}  // namespace exogym::runtime::train
