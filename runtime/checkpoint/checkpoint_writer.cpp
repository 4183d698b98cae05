#include "exogym/runtime/checkpoint/checkpoint_writer.h"

#include <map>

#include "exogym/runtime/checkpoint/checkpoint_reader.h"
#include "exogym/runtime/util/atomic_file.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::checkpoint {

namespace fs = std::filesystem;

namespace {

std::string partial_name(int64_t step) { return "." + checkpoint_folder_name(step) + ".partial"; }

void remove_quietly(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

}  // namespace

std::string checkpoint_folder_name(int64_t step) { return "step-" + std::to_string(step); }

CheckpointWriter::CheckpointWriter(fs::path run_dir, int keep) : folder_(run_dir / "checkpoints"), keep_(keep) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 8 && name.front() == '.' && name.compare(name.size() - 8, 8, ".partial") == 0)
      remove_quietly(entry.path());
  }
}

CheckpointWriter::~CheckpointWriter() {
  for (int64_t step : partial_) remove_quietly(folder_ / partial_name(step));
}

fs::path CheckpointWriter::partial_folder(int64_t step) {
  const fs::path partial = folder_ / partial_name(step);
  std::lock_guard<std::mutex> lock(mutex_);
  // Several processes may create it: each its own nodes' files.
  if (partial_.insert(step).second) {
    std::error_code ec;
    fs::create_directories(partial, ec);
    if (ec) throw sdk::Error(partial.string() + ": cannot create the checkpoint folder: " + ec.message());
  }
  return partial;
}

fs::path CheckpointWriter::commit(const CheckpointIndex& index) {
  std::lock_guard<std::mutex> lock(mutex_);
  const fs::path partial = folder_ / partial_name(index.step);
  const fs::path final_folder = folder_ / checkpoint_folder_name(index.step);
  util::write_file_atomically(partial / kIndexFile, index.to_json().dump(2) + "\n");
  // A checkpoint of the same step (a run resumed from before it) is moved
  // aside first: rename cannot replace a folder that has files.
  const fs::path replaced = folder_ / ("." + checkpoint_folder_name(index.step) + ".old");
  std::error_code ec;
  if (fs::exists(final_folder)) {
    remove_quietly(replaced);
    fs::rename(final_folder, replaced, ec);
    if (ec) throw sdk::Error(final_folder.string() + ": cannot replace: " + ec.message());
  }
  fs::rename(partial, final_folder, ec);
  if (ec) throw sdk::Error(final_folder.string() + ": cannot rename the checkpoint into place: " + ec.message());
  partial_.erase(index.step);
  util::sync_folder(folder_);
  remove_quietly(replaced);
  prune();
  return final_folder;
}

void CheckpointWriter::prune() {
  const std::map<int64_t, fs::path> complete = list_checkpoints(folder_.parent_path());
  int64_t excess = static_cast<int64_t>(complete.size()) - keep_;
  for (auto it = complete.begin(); excess > 0; ++it, --excess) remove_quietly(it->second);
}

}  // namespace exogym::runtime::checkpoint
