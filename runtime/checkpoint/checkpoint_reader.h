#pragma once
// Finding and loading the checkpoint a run resumes from.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "exogym/runtime/checkpoint/checkpoint_index.h"
#include "exogym/runtime/checkpoint/client_states.h"
#include "exogym/runtime/checkpoint/node_state.h"

namespace spdlog {
class logger;
}

namespace exogym::runtime::checkpoint {

// The folders of run_dir/checkpoints named step-<N> that hold an index.json,
// by step (whether they load is not checked here).
std::map<int64_t, std::filesystem::path> list_checkpoints(const std::filesystem::path& run_dir);

// The folders named step-<N> without an index.json, in name order.
std::vector<std::filesystem::path> list_incomplete_checkpoints(const std::filesystem::path& run_dir);

struct LoadedCheckpoint {
  std::filesystem::path folder;
  CheckpointIndex index;
  std::map<int, NodeState> nodes;  // by rank: the nodes asked for
  // The clients' states (client_states.h), where the run keeps them: read
  // and checked by the run's check, below, so that a damaged file falls
  // back to the checkpoint before as a damaged node file does.
  ClientStates clients;
};

// Reads and checks the index and the files of nodes [first, first + count)
// that the checkpoint has: sdk::DataError naming the file at fault.
LoadedCheckpoint load_checkpoint(const std::filesystem::path& folder, int first, int count);

// Checks that a loaded checkpoint fits the run (its shapes, the run
// folder's CSVs): sdk::DataError naming the file and the field otherwise.
// It may read more of the checkpoint into it (its clients' states).
using CheckpointCheck = std::function<void(LoadedCheckpoint&)>;

// The checkpoint of step `from_step`, or without it the newest that loads
// and passes `check`; a newer one that does not is skipped with a warning
// naming what is wrong, as is a step folder without an index. Nothing is
// changed on disk. sdk::DataError when the run folder has no checkpoint (or
// none that loads); sdk::ConfigError at "--from-step" when there is none at
// that step.
LoadedCheckpoint find_checkpoint(const std::filesystem::path& run_dir, std::optional<int64_t> from_step, int first,
                                 int count, spdlog::logger& log, const CheckpointCheck& check = {});

}  // namespace exogym::runtime::checkpoint
