#pragma once
// A run's set-up: everything that can be wrong with a manifest is found here,
// before the first node starts (plugins loaded, their options checked, the
// data read).
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exogym/runtime/data/client_slots.h"
#include "exogym/runtime/data/node_data.h"
#include "exogym/runtime/data/sampler.h"
#include "exogym/runtime/dist/world.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/train/training.h"
#include "exogym/sdk/dataset.h"

namespace exogym::runtime::plugin {
class LoadedPlugin;
}

namespace exogym::runtime::train {

// This process's part in a run. Over several processes, it runs a block of
// the nodes, and process 0 (which hosts node 0) writes the run folder.
struct ProcessRole {
  dist::ProcessMesh* mesh = nullptr;  // null: one process runs every node
  int processes = 1;
  dist::NodeBlock block;
  bool writes = true;
};

// Throws ConfigError at "nodes" when a process would have no node.
ProcessRole process_role(const manifest::Manifest& m, dist::ProcessMesh* mesh);

// A run over P processes needs at least one node per process.
void check_processes(const manifest::Manifest& m, int processes);

struct TrainingPlugins {
  std::shared_ptr<plugin::LoadedPlugin> model, strategy;
  nlohmann::json model_options, strategy_options;  // validated, every default filled in
  // The steps of a participation round: participation.round, or else the
  // strategy's option H; 0 without "participation".
  int64_t round_steps = 0;
  // A variant that switched plugin: the base's options the new plugin
  // declares too but the variant left at the new plugin's defaults, one
  // warning per section (docs/manifest.md#variants).
  std::vector<std::string> warnings;
};

// Loads the model and strategy plugins and validates their options.
TrainingPlugins load_plugins(const manifest::Manifest& m, plugin::PluginLoader& loader);

// Whether the run evaluates: a validation split and a positive eval.size.
bool eval_enabled(const manifest::Manifest& m);

// The run's data as this process's nodes see it.
struct TrainingData {
  // train: shared by the nodes, or with a per-node dataset plugin the first
  // node's of this process. val: null when the run does not evaluate.
  std::shared_ptr<const sdk::Dataset> train, val;
  // A per-node dataset plugin's training sets, by global rank (this
  // process's nodes only); empty for a shared dataset.
  std::vector<std::shared_ptr<const sdk::Dataset>> node_train;
  nlohmann::json train_options, val_options;  // validated, for config.json
  std::unique_ptr<data::Sampler> sampler;     // which training examples each node draws
  // With a population (Manifest::has_population): the client each node
  // trains, which the sampler reads and train/membership.h assigns.
  std::shared_ptr<data::ClientSlots> client_slots;
  std::vector<int64_t> val_indices;       // the validation subset, the same for every run
  std::vector<data::NodeData> node_data;  // what each node trains on, by rank (data.csv)
  double seconds = 0;                     // wall time spent loading

  // The training set node `rank` reads.
  const sdk::Dataset& train_of(int rank) const { return node_train.empty() ? *train : *node_train[rank]; }
};

// Loads the datasets (or takes them from `cache`, when an earlier run of this
// process loaded the same ones) and prepares sampling. With a per-node
// dataset plugin over several processes, a collective: the processes
// exchange their nodes' data sizes and label counts. A training label
// outside the model's classes (`model_options`' num_classes, when it has
// one) is an sdk::ConfigError at data.train.path naming the example.
TrainingData load_data(const manifest::Manifest& m, plugin::PluginLoader& loader, const ProcessRole& role,
                       DatasetCache* cache, const nlohmann::json& model_options);

}  // namespace exogym::runtime::train
