#pragma once
// Trains one run of a manifest (one variant of "runs") on the simulated
// cluster and writes its run folder.
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "exogym/runtime/manifest.h"
#include "exogym/runtime/progress.h"
#include "exogym/runtime/run_writer.h"
#include "exogym/sdk/dataset.h"

namespace exogym::runtime {

class PluginLoader;

struct RunOptions {
  Progress::Mode progress = Progress::Mode::Lines;
  // The folder to write into; empty: a fresh folder under the manifest's
  // output.dir (see Manifest::run_dir and unique_folder).
  std::filesystem::path run_dir;
  // Datasets already loaded by earlier runs of this process, keyed by what
  // defines them, so that the variants of "runs" decode MNIST only once.
  std::map<std::string, std::shared_ptr<const sdk::Dataset>>* dataset_cache = nullptr;
};

// Loads the model and strategy plugins and validates their options, without
// training: used to check every variant before the first one starts.
void check_run(const Manifest& manifest, PluginLoader& loader);

struct EvalRecord {
  int64_t step = 0;
  EvalValues local, global;
};

struct RunResult {
  std::string name, variant;
  std::filesystem::path run_dir;
  std::string model_plugin, strategy_plugin;
  std::vector<std::string> metric_names;
  int nodes = 0;
  int64_t steps = 0;
  int64_t examples_trained = 0;
  int64_t parameters = 0;
  double last_train_loss = 0;
  double wall_seconds = 0;
  std::optional<EvalRecord> final_eval;
};

// Everything is validated (plugins loaded, options checked, data read) before
// the first node starts. Throws sdk::ConfigError for manifest problems and
// sdk::Error naming the node and step when training fails.
RunResult train_run(const Manifest& manifest, PluginLoader& loader, const RunOptions& options);

}  // namespace exogym::runtime
