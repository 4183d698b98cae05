#pragma once
// The manifest (v1): the JSON file a user writes to describe a run, or several
// runs to compare ("runs": variants as patches over the base, patch.h).
// Loading validates every key against the manifest's declared schema
// (schema.h) and fills in every default, so the rest of the runtime reads
// typed fields and never re-checks the JSON. Plugin options (model.options,
// strategy.options, data.*.options) stay raw JSON here: the plugin loader
// validates them against the options each plugin declares.
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "exogym/runtime/data/partition.h"
#include "exogym/runtime/sim/adversary_spec.h"
#include "exogym/runtime/sim/failure_spec.h"
#include "exogym/runtime/sim/network_model.h"
#include "exogym/runtime/sim/node_factors.h"
#include "exogym/runtime/sim/participation.h"

namespace exogym::runtime::manifest {

// A plugin named by the manifest: {"plugin": "diloco", "options": {...}}.
struct PluginRef {
  std::string plugin;
  nlohmann::json options = nlohmann::json::object();
  std::string path;  // JSON path of the object, e.g. "strategy", for error messages
  // A variant or a --set that switched to another plugin: the plugin it
  // switched from, the options of it the run does not inherit (variants.h),
  // so that the runtime can name those the new plugin declares too, and
  // what switched ("variant \"ddp\"", "--set strategy.plugin=allreduce").
  // Empty otherwise.
  std::string base_plugin;
  nlohmann::json base_options = nlohmann::json::object();
  std::string switched_by;
};

// One dataset split: data.train or data.val.
struct DataSpec {
  std::string dataset;
  std::filesystem::path path;  // absolute; empty when the manifest gives none
  std::string split;
  data::PartitionSpec partition;
  nlohmann::json options = nlohmann::json::object();
  std::string json_path;  // "data.train" or "data.val"
};

// "network": the links of the simulated cluster (see network_model.h).
struct NetworkSpec {
  sim::Link link;
  std::map<int, sim::Link> per_node;
  // The simulated seconds survivors lose noticing a failure, at their first
  // strategy collective after it (network.failure_timeout).
  double failure_timeout = 30;
  // network.bandwidth_distribution, for the clients of a population (each
  // client's draw; the nodes' draws are in per_node already).
  std::optional<sim::FactorDistribution> bandwidth_distribution;
};

// "compute": how long a step takes on the simulated cluster.
struct ComputeSpec {
  std::optional<double> step_time;  // seconds at speed 1; nullopt = "measured"
  std::map<int, double> speed;      // per-node speed factors (default 1)
  // compute.speed_distribution, for the clients of a population.
  std::optional<sim::FactorDistribution> speed_distribution;
};

// "checkpoint": when a run saves what resuming it needs (checkpoint/).
struct CheckpointSpec {
  int64_t interval = 0;  // steps between checkpoints; 0: none
  int keep = 2;          // newest checkpoints kept
};

// The arithmetic of forward passes ("precision"): fp32 throughout, or bf16
// under LibTorch's autocast with fp32 weights, gradients, optimizer state
// and communication (train/autocast_scope.h).
enum class Precision { Fp32, Bf16 };

// How the nodes of a process compute ("execution"): stacked where the model
// and the run allow it, always stacked (an error where it cannot be), or
// each node on its own (train/node_stacks.h).
enum class Execution { Auto, Stacked, PerNode };

// One fully resolved run. The defaults and meanings of the fields are
// declared once, in schema.cpp.
struct Manifest {
  std::string name;     // run name (the base manifest's)
  std::string variant;  // empty for a single run
  uint64_t seed = 0;
  bool seeded = false;  // one of the manifest's "seeds" (seeds.h): its folder is seed-<seed>
  int nodes = 0;
  std::string device;
  Precision precision = Precision::Fp32;
  Execution execution = Execution::Auto;
  int parallelism = 0, threads = 0;  // 0 = auto, decided by the runtime
  bool pin_threads = false;          // each compute slot on its own cores
  PluginRef model, strategy;
  DataSpec train_data;
  std::optional<DataSpec> val_data;
  int64_t max_steps = 0, batch_size = 0, minibatch_size = 0;
  bool stop_on_nonfinite = true;  // train.on_nonfinite
  int64_t eval_interval = 0, eval_size = 0, eval_batch_size = 0;
  // The global validation loss a run aims for: the summary reports when it
  // was first reached.
  std::optional<double> target_loss;
  NetworkSpec network;
  ComputeSpec compute;
  std::vector<sim::NodeFault> faults;
  std::optional<sim::ChurnSpec> churn;
  std::vector<sim::AdversarySpec> adversaries;
  // "participation": each round, only some nodes take part (sim/participation.h).
  std::optional<sim::ParticipationSpec> participation;
  // Whether nodes fail, rejoin or join late in this run.
  bool has_faults() const { return !faults.empty() || churn.has_value(); }
  // Whether the live nodes may change from step to step (train/membership.h):
  // failures, or nodes sitting rounds out.
  bool varies_membership() const { return has_faults() || participation.has_value(); }
  // Whether the rounds draw from a population of clients larger than the
  // nodes, each node training one drawn client at a time (participation.clients).
  bool has_population() const { return participation && participation->clients && *participation->clients > nodes; }
  // "faults" and "churn" with what sim/ builds their schedule from.
  sim::FailureSpec failure_spec() const { return {nodes, max_steps, seed, faults, churn}; }
  CheckpointSpec checkpoint;
  std::filesystem::path output_dir;        // absolute
  std::vector<std::string> model_formats;  // output.save_model: model.<format> files to write
  std::filesystem::path base_dir;          // the manifest's folder (absolute)
  // This run's manifest with every default filled in and paths resolved
  // (written as config.json). It has no "runs" key and is itself a valid
  // manifest, so a run can be repeated from its config.json.
  nlohmann::json resolved;

  // output_dir/name, or output_dir/name/variant; a seeded run's has
  // /seed-<seed> after that.
  std::filesystem::path run_dir() const;
  // run_dir() inside output_dir/name: "", variant, seed-<seed> or
  // variant/seed-<seed>.
  std::filesystem::path run_subdir() const;
};

struct ManifestSet {
  std::string name;
  std::vector<Manifest> runs;  // one entry for a plain manifest; one per variant (and seed) otherwise
  bool has_variants = false;
  std::vector<uint64_t> seeds;  // "seeds": each variant's runs follow one another, in this order

  // Whether the runs share a comparison folder, output_dir/name (variants,
  // or seeds).
  bool compares() const { return has_variants || !seeds.empty(); }
};

// Reads and validates a manifest file; `overrides` are "--set a.b=v"
// assignments (overrides.h). Throws sdk::ConfigError: with an empty path
// naming the file when it cannot be read or is not valid JSON (with line and
// column), else naming the JSON path at fault.
ManifestSet load_manifest(const std::filesystem::path& file, const std::vector<std::string>& overrides = {});

// Validates an already parsed manifest. Relative paths resolve against
// `base_dir`; `default_name` is the run name when the manifest sets none.
ManifestSet parse_manifest(const nlohmann::json& json, const std::filesystem::path& base_dir,
                           const std::string& default_name, const std::vector<std::string>& overrides = {});

}  // namespace exogym::runtime::manifest
