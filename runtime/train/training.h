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

#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/output/progress.h"
#include "exogym/runtime/output/run_writer.h"
#include "exogym/sdk/dataset.h"

namespace exogym::runtime::dist {
class ProcessMesh;
}
namespace exogym::runtime::plugin {
class PluginLoader;
}

namespace exogym::runtime::train {


struct RunOptions {
  output::Progress::Mode progress = output::Progress::Mode::Lines;
  // The folder to write into; empty: a fresh folder under the manifest's
  // output.dir (see Manifest::run_dir and unique_folder).
  std::filesystem::path run_dir;
  // Datasets already loaded by earlier runs of this process, keyed by what
  // defines them, so that the variants of "runs" decode MNIST only once.
  std::map<std::string, std::shared_ptr<const sdk::Dataset>>* dataset_cache = nullptr;
  // A run spread over several processes: this process's connection to the
  // others (null: one process runs every node). Process 0 writes the run
  // folder; the others only train their nodes.
  dist::ProcessMesh* mesh = nullptr;
  bool partial_reduce = false;  // see HierarchicalGroup and WorldSpec
  // The cores this process may use (0: all it can see); processes sharing a
  // host split its cores.
  int cores = 0;
};

// Loads the model and strategy plugins and validates their options, without
// training: used to check every variant before the first one starts.
// `processes`: how many processes the run is spread over.
void check_run(const manifest::Manifest& manifest, plugin::PluginLoader& loader, int processes = 1);

struct EvalRecord {
  int64_t step = 0;
  output::EvalValues local, global;
  double bytes_sent = 0;  // per node (mean over nodes), cumulative, strategy traffic
  double sim_time_s = 0;  // node 0's simulated clock
};

// When a run first reached eval.target_loss (global validation loss).
struct TargetHit {
  int64_t step = 0;
  double sim_time_s = 0;
  double bytes_sent = 0;  // per node
  double wall_seconds = 0;
};

// The simulated cluster's account of a run (comm_meter.h).
struct SimulationSummary {
  double bytes_sent_per_node = 0;      // strategy traffic, mean over nodes
  double bytes_sent_total = 0;         // strategy traffic, all nodes
  double runtime_bytes_sent_total = 0;  // the simulator's own collectives
  double time_s = 0;                   // the slowest node's clock at the end
  double compute_s = 0, communication_s = 0, waiting_s = 0;  // means over nodes
  double ddp_bytes_sent_per_node = 0;  // DDP (gradient all-reduce every step), same model, nodes and steps
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
  // Where this process's wall time went: loading the datasets, from the
  // start of train_run to the first step of any of its nodes (datasets
  // included), and the training loop from that first step to the end of its
  // nodes' last step (evaluations included).
  double dataset_seconds = 0, startup_seconds = 0, loop_seconds = 0;
  std::optional<EvalRecord> final_eval;
  SimulationSummary simulated;
  std::optional<double> target_loss;
  std::optional<TargetHit> target_hit;
};

// Everything is validated (plugins loaded, options checked, data read) before
// the first node starts. Throws sdk::ConfigError for manifest problems and
// sdk::Error naming the node and step when training fails.
RunResult train_run(const manifest::Manifest& manifest, plugin::PluginLoader& loader, const RunOptions& options);

}  // namespace exogym::runtime::train
