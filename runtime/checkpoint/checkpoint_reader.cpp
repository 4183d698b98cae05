#include "exogym/runtime/checkpoint/checkpoint_reader.h"

#include <spdlog/logger.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exogym/runtime/checkpoint/checkpoint_writer.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::checkpoint {

namespace fs = std::filesystem;

namespace {

// The step of a folder named step-<N>, written as checkpoint_folder_name does.
std::optional<int64_t> step_of(const std::string& name) {
  if (name.rfind("step-", 0) != 0 || name.size() == 5) return std::nullopt;
  const std::string digits = name.substr(5);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 18) return std::nullopt;
  const int64_t step = std::stoll(digits);
  if (checkpoint_folder_name(step) != name) return std::nullopt;
  return step;
}

}  // namespace

std::map<int64_t, fs::path> list_checkpoints(const fs::path& run_dir) {
  std::map<int64_t, fs::path> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir / "checkpoints", ec)) {
    const auto step = step_of(entry.path().filename().string());
    if (step && fs::exists(entry.path() / kIndexFile)) found[*step] = entry.path();
  }
  return found;
}

std::vector<fs::path> list_incomplete_checkpoints(const fs::path& run_dir) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir / "checkpoints", ec)) {
    if (step_of(entry.path().filename().string()) && !fs::exists(entry.path() / kIndexFile))
      found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

LoadedCheckpoint load_checkpoint(const fs::path& folder, int first, int count) {
  LoadedCheckpoint loaded;
  loaded.folder = folder;
  loaded.index = CheckpointIndex::read(folder);
  // A run with more nodes is refused by the settings check (nodes), which
  // names the field; here only the nodes the checkpoint has are read.
  for (int rank = first; rank < std::min(first + count, loaded.index.nodes); ++rank)
    loaded.nodes.emplace(rank, read_node_state(folder, rank, loaded.index.step));
  return loaded;
}

LoadedCheckpoint find_checkpoint(const fs::path& run_dir, std::optional<int64_t> from_step, int first, int count,
                                 spdlog::logger& log, const CheckpointCheck& check) {
  // Never made by the writer (it renames a complete folder into place):
  // someone's copy or edit, not used, and said so.
  for (const fs::path& folder : list_incomplete_checkpoints(run_dir))
    log.warn("skipping checkpoint {}: it has no {} (an incomplete copy?)", folder.string(), kIndexFile);
  const std::map<int64_t, fs::path> found = list_checkpoints(run_dir);
  if (found.empty())
    throw sdk::DataError(run_dir.string() +
                         ": no checkpoint to resume from (checkpoints are written when checkpoint.interval > 0)");
  if (from_step) {
    auto it = found.find(*from_step);
    if (it == found.end()) {
      std::string steps;
      for (const auto& [step, folder] : found) steps += (steps.empty() ? "" : ", ") + std::to_string(step);
      throw sdk::ConfigError("--from-step",
                             "no checkpoint at step " + std::to_string(*from_step) + "; there are: " + steps);
    }
    LoadedCheckpoint loaded = load_checkpoint(it->second, first, count);
    if (check) check(loaded);
    return loaded;
  }
  std::string problems;
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    try {
      LoadedCheckpoint loaded = load_checkpoint(it->second, first, count);
      if (check) check(loaded);
      return loaded;
    } catch (const sdk::DataError& e) {
      log.warn("skipping checkpoint {}: {}", it->second.string(), e.what());
      problems += std::string("\n  ") + e.what();
    }
  }
  throw sdk::DataError(run_dir.string() + ": no checkpoint loads:" + problems);
}

}  // namespace exogym::runtime::checkpoint
