#pragma once
// Trains one run of a manifest (one variant of "runs") on the simulated
// cluster and writes its run folder.
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/output/progress.h"
#include "exogym/runtime/train/training_result.h"
#include "exogym/sdk/dataset.h"

namespace exogym::runtime::dist {
class ProcessMesh;
}
namespace exogym::runtime::plugin {
class PluginLoader;
}

namespace exogym::runtime::train {

// Datasets already loaded by the previous run of this process, keyed by
// what defines them, so that the variants of "runs" decode MNIST only once.
// Only the last run's are kept: a dataset's key holds the seed, so with
// --seeds every run loads its own, and keeping them all grew memory by a
// dataset per seed (thousands of seeds ran out of memory).
struct DatasetCache {
  std::map<std::string, std::shared_ptr<const sdk::Dataset>> entries;
  std::set<std::string> used;  // by the run in progress

  // Between runs: forgets every dataset the run that ended did not use.
  void end_run();
};

struct TrainingOptions {
  output::Progress::Mode progress = output::Progress::Mode::Lines;
  // The folder to write into; empty: a fresh folder under the manifest's
  // output.dir (see Manifest::run_dir and output::create_run_folder).
  std::filesystem::path run_dir;
  DatasetCache* dataset_cache = nullptr;
  // A run spread over several processes: this process's connection to the
  // others (null: one process runs every node). Process 0 writes the run
  // folder; the others only train their nodes.
  dist::ProcessMesh* mesh = nullptr;
  bool partial_reduce = false;  // see HierarchicalGroup and WorldSpec
  // The cores this process may use (0: all it can see); processes sharing a
  // host split its cores.
  int cores = 0;
  // Processes of this run on this host: they share its memory too.
  int host_processes = 1;
  // Start even when the nodes' memory estimate exceeds the available memory
  // (memory_check.h), with a warning instead of the refusal.
  bool force = false;
  // Continue the run in `run_dir` from its newest checkpoint that loads, or
  // from the one of step `from_step` (docs/checkpoints.md).
  bool resume = false;
  std::optional<int64_t> from_step;
  // For benchmarks: TrainingResult::after_mark_seconds runs from the moment the
  // first node finished this step (0-based; -1: none) to the loop's end.
  // Where a collective holds every node at that step (DiLoCo's outer step),
  // that is the time of the steps after it, without the first steps' costs
  // (page faults on fresh optimizer state, cold caches). Elsewhere it is
  // not: with fewer compute slots than nodes, the first nodes take their
  // local steps before the others start theirs.
  int64_t timing_mark_step = -1;
};

// Loads the model and strategy plugins and validates their options, without
// training: used to check every variant before the first one starts.
// `processes`: how many processes the run is spread over. Returns the
// warnings to show once (TrainingPlugins::warnings).
std::vector<std::string> check_run(const manifest::Manifest& manifest, plugin::PluginLoader& loader, int processes = 1);

// Everything is validated (plugins loaded, options checked, data read) before
// the first node starts. Throws sdk::ConfigError for manifest problems and
// sdk::Error naming the node and step when training fails.
TrainingResult train_run(const manifest::Manifest& manifest, plugin::PluginLoader& loader,
                         const TrainingOptions& options);

}  // namespace exogym::runtime::train
