#pragma once
// Writes a run's checkpoints into <run folder>/checkpoints/step-<N>/,
// atomically: every file of step N goes into a partial folder
// (".step-<N>.partial"), each flushed to the disk as it is written
// (write_file_atomically), then index.json, then the folder is renamed to
// step-<N> and the checkpoints folder synced. A crash or a full disk at any
// moment leaves either no step-<N> or a complete one, and never touches the
// checkpoints before it. After each commit only the `keep` newest remain.
//
// Writing is collective: at a step boundary every node writes its own file
// (node_state.h) on its own thread, the nodes meet, then one node commits.
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <set>

#include "exogym/runtime/checkpoint/checkpoint_index.h"

namespace exogym::runtime::checkpoint {

class CheckpointWriter {
 public:
  // Removes partial folders an earlier crash left in run_dir/checkpoints.
  CheckpointWriter(std::filesystem::path run_dir, int keep);
  // Removes the partial folder of a checkpoint that was begun but not
  // committed (a failed write, an aborted run).
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // The partial folder of step `step`, created on the first call. Any node
  // thread; sdk::Error naming the folder when it cannot be created.
  std::filesystem::path partial_folder(int64_t step);

  // Once every node's file of index.step is in its partial folder: writes
  // index.json, renames the folder into place (replacing an older
  // checkpoint of the same step), removes the checkpoints beyond `keep`.
  // Returns the checkpoint's folder. sdk::Error naming the file on failure.
  std::filesystem::path commit(const CheckpointIndex& index);

  const std::filesystem::path& folder() const { return folder_; }

  // Removes the complete checkpoints beyond the `keep` newest (commit does;
  // a resume does too, since a kill between a commit and its pruning leaves
  // one too many).
  void prune();

 private:
  std::filesystem::path folder_;
  int keep_;
  std::mutex mutex_;
  std::set<int64_t> partial_;  // steps begun and not committed
};

// "step-<N>" and ".step-<N>.partial".
std::string checkpoint_folder_name(int64_t step);

}  // namespace exogym::runtime::checkpoint
