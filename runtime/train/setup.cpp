#include "exogym/runtime/train/setup.h"

#include <chrono>
#include <map>
#include <numeric>
#include <optional>
#include <string>

#include "exogym/runtime/data/example_labels.h"
#include "exogym/runtime/data/label_range.h"
#include "exogym/runtime/data/node_set_sampler.h"
#include "exogym/runtime/data/population_sampler.h"
#include "exogym/runtime/data/registry.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/option_validation.h"

namespace exogym::runtime::train {

using nlohmann::json;

namespace {

// What defines a dataset: a run whose datasets have the same key reuses them.
std::string dataset_key(const manifest::DataSpec& spec, const json& resolved_options, const manifest::Manifest& m,
                        const sdk::DatasetRequest& request) {
  return spec.dataset + "|" + spec.path.string() + "|" + spec.split + "|" + resolved_options.dump() + "|" +
         std::to_string(m.seed) + "|" + std::to_string(m.nodes) + "|" + std::to_string(request.first_node) + "+" +
         std::to_string(request.local_nodes) + "|" + std::to_string(request.rank);
}

// The dataset of `spec` for the nodes of `block`, or for node `rank` alone
// (a per-node dataset's training set).
std::shared_ptr<const sdk::Dataset> make_dataset(const manifest::DataSpec& spec, plugin::PluginLoader& loader,
                                                 const manifest::Manifest& m, json& resolved_options,
                                                 const dist::NodeBlock& block, DatasetCache* cache, int rank = -1) {
  sdk::DatasetRequest request;
  request.path = spec.path;
  request.split = spec.split;
  request.seed = m.seed;
  request.first_node = rank < 0 ? block.first : rank;
  request.local_nodes = rank < 0 ? block.count : 1;
  request.num_nodes = m.nodes;
  request.rank = rank;
  const std::string options_path = spec.json_path + ".options";
  try {
    std::shared_ptr<plugin::LoadedPlugin> plugin;
    if (auto specs = data::builtin_dataset_options(spec.dataset)) {
      resolved_options = sdk::validate_options(spec.options, *specs, options_path);
    } else {
      plugin = loader.load("dataset", spec.dataset, spec.json_path + ".dataset", m.base_dir);
      resolved_options = plugin->validate(spec.options, options_path, m.base_dir);
    }
    const std::string key = dataset_key(spec, resolved_options, m, request);
    if (cache) {
      cache->used.insert(key);
      if (auto it = cache->entries.find(key); it != cache->entries.end()) return it->second;
    }
    std::shared_ptr<const sdk::Dataset> dataset =
        plugin ? plugin->create_dataset(resolved_options, request)
               : data::make_builtin_dataset(spec.dataset, resolved_options, request);
    if (cache) cache->entries[key] = dataset;
    return dataset;
  } catch (const sdk::DataError& e) {
    throw sdk::ConfigError(spec.json_path + ".path", e.what());
  } catch (const sdk::ConfigError& e) {
    // A dataset's own errors: an empty path is its split, else an option.
    if (e.path().rfind(spec.json_path, 0) == 0) throw;
    throw sdk::ConfigError(spec.json_path + (e.path().empty() ? ".split" : ".options." + e.path()), e.message());
  }
}

// Refuses, at data.train.path, a label the model has no class for (`node`:
// whose dataset it is, for a per-node one).
void check_label_range(const manifest::Manifest& m, const std::optional<std::vector<int64_t>>& labels,
                       std::optional<int64_t> num_classes, const std::string& node = "") {
  if (!labels || !num_classes) return;
  if (auto problem = data::label_out_of_range(*labels, *num_classes, m.model.path + ".options.num_classes"))
    throw sdk::ConfigError(m.train_data.json_path + ".path", node + *problem);
}

// The training set's labels, and the sampler of its partition. A label
// partition of a dataset without labels is an error at the partition.
void prepare_sampling(const manifest::Manifest& m, TrainingData& d, std::optional<int64_t> num_classes) {
  const manifest::DataSpec& spec = m.train_data;
  std::optional<std::vector<int64_t>> labels;
  try {
    labels = data::example_labels(*d.train);
  } catch (const sdk::DataError& e) {
    throw sdk::ConfigError(spec.json_path + ".path", e.what());
  }
  check_label_range(m, labels, num_classes);
  if (spec.partition.by_label() && !labels) {
    throw sdk::ConfigError(spec.partition.json_path,
                           std::string("\"") + spec.partition.name() +
                               "\" shares out the examples by label, but the batches of dataset \"" + spec.dataset +
                               "\" have no \"target\" holding one integer per example");
  }
  const std::vector<int64_t>* label_list = labels ? &*labels : nullptr;
  if (m.has_population()) {
    d.client_slots = std::make_shared<data::ClientSlots>(m.nodes);
    d.sampler = std::make_unique<data::PopulationSampler>(
        spec.partition, d.train->size(), label_list, *m.participation->clients, m.batch_size, m.seed, d.client_slots);
  } else {
    d.sampler = data::make_sampler(spec.partition, d.train->size(), label_list, m.nodes, m.batch_size, m.seed);
  }
  for (int r = 0; r < m.nodes; ++r) d.node_data.push_back(data::node_data(*d.sampler, r, label_list));
}

// Whether data.train names a dataset plugin exported with
// EXOGYM_NODE_DATASET_PLUGIN (built-in datasets are shared).
bool per_node_dataset(const manifest::DataSpec& spec, plugin::PluginLoader& loader, const manifest::Manifest& m) {
  if (data::builtin_dataset_options(spec.dataset)) return false;
  return loader.load("dataset", spec.dataset, spec.json_path + ".dataset", m.base_dir)->description().per_node;
}

// This process's nodes' data rows, as JSON for the other processes.
json local_node_rows(const manifest::Manifest& m, const TrainingData& d, const dist::NodeBlock& block,
                     std::optional<int64_t> num_classes) {
  json rows = json::array();
  for (int r = block.first; r < block.first + block.count; ++r) {
    const sdk::Dataset& dataset = *d.node_train[r];
    if (dataset.size() == 0) {
      throw sdk::ConfigError(m.train_data.json_path + ".dataset",
                             "the dataset plugin built an empty training set for node " + std::to_string(r));
    }
    std::optional<std::vector<int64_t>> labels;
    try {
      labels = data::example_labels(dataset);
    } catch (const sdk::DataError& e) {
      throw sdk::ConfigError(m.train_data.json_path + ".path", "node " + std::to_string(r) + ": " + e.what());
    }
    check_label_range(m, labels, num_classes, "node " + std::to_string(r) + ": ");
    json counts = json::array();
    if (labels) {
      std::map<int64_t, int64_t> histogram;
      for (int64_t label : *labels) ++histogram[label];
      for (const auto& [label, count] : histogram) counts.push_back({label, count});
    }
    rows.push_back({{"node", r}, {"examples", dataset.size()}, {"labels", counts}});
  }
  return rows;
}

// Each node its own dataset: one instance per node of this process, read
// whole by its own sampler; every process learns every node's sizes and
// label counts (data.csv) from the others.
void load_node_datasets(const manifest::Manifest& m, plugin::PluginLoader& loader, const ProcessRole& role,
                        DatasetCache* cache, std::optional<int64_t> num_classes, TrainingData& d) {
  const manifest::DataSpec& spec = m.train_data;
  if (spec.partition.kind != data::PartitionSpec::Kind::Iid) {
    throw sdk::ConfigError(spec.partition.json_path,
                           "dataset \"" + spec.dataset +
                               "\" is built once per node, each node training on its own: "
                               "leave the partition out (it only shares out a shared dataset)");
  }
  d.node_train.resize(static_cast<size_t>(m.nodes));
  for (int r = role.block.first; r < role.block.first + role.block.count; ++r)
    d.node_train[r] = make_dataset(spec, loader, m, d.train_options, role.block, cache, r);
  d.train = d.node_train[role.block.first];
  json rows = local_node_rows(m, d, role.block, num_classes);
  if (role.mesh) {
    const std::vector<std::string> parts = role.mesh->all_gather_text(rows.dump());
    rows = json::array();
    for (const auto& text : parts)
      for (auto& row : json::parse(text)) rows.push_back(std::move(row));
  }
  std::vector<std::vector<int64_t>> examples(static_cast<size_t>(m.nodes));
  d.node_data.assign(static_cast<size_t>(m.nodes), {});
  for (const auto& row : rows) {
    const int r = row.at("node");
    d.node_data[r].examples = row.at("examples");
    for (const auto& count : row.at("labels"))
      d.node_data[r].label_counts[count.at(0).get<int64_t>()] = count.at(1).get<int64_t>();
    examples[r].resize(static_cast<size_t>(d.node_data[r].examples));
    std::iota(examples[r].begin(), examples[r].end(), 0);
  }
  d.sampler = std::make_unique<data::NodeSetSampler>(std::move(examples), m.batch_size, m.seed);
}

}  // namespace

void check_processes(const manifest::Manifest& m, int processes) {
  if (m.nodes < processes) {
    throw sdk::ConfigError("nodes", "the run has " + std::to_string(m.nodes) + " node" + (m.nodes == 1 ? "" : "s") +
                                        " but " + std::to_string(processes) +
                                        " processes (--nproc or WORLD_SIZE): every process needs at least one node");
  }
}

ProcessRole process_role(const manifest::Manifest& m, dist::ProcessMesh* mesh) {
  ProcessRole role;
  role.mesh = mesh;
  role.processes = mesh ? mesh->size() : 1;
  check_processes(m, role.processes);
  role.block = dist::node_block(m.nodes, role.processes, mesh ? mesh->rank() : 0);
  role.writes = !mesh || mesh->rank() == 0;
  return role;
}

namespace {

// The warning for a variant or a --set that switched `ref` to `plugin` and
// so left the base's options behind: those `plugin` declares too (the
// shared local-step options, typically: optimizer, lr_schedule, max_norm)
// silently took its defaults. Options only the base's plugin knows are not
// worth a word.
std::optional<std::string> uninherited_options(const manifest::PluginRef& ref, const plugin::LoadedPlugin& plugin) {
  if (ref.base_plugin.empty()) return std::nullopt;
  std::string names;
  for (const auto& spec : plugin.options()) {
    if (ref.base_options.contains(spec.name)) names += (names.empty() ? "" : ", ") + spec.name;
  }
  if (names.empty()) return std::nullopt;
  const bool by_set = ref.switched_by.rfind("--set", 0) == 0;
  return ref.path + ".options: " + ref.switched_by + " switches " + ref.path + ".plugin from \"" + ref.base_plugin +
         "\" to \"" + ref.plugin + "\", so it does not inherit " + (by_set ? "the manifest's " : "the base's ") +
         ref.path + ".options; \"" + ref.plugin + "\" declares these too and they take its defaults: " + names +
         (by_set ? " (set them with --set " + ref.path + ".options.<name>=... to keep the manifest's values)"
                 : " (set them in the variant to keep the base's values)");
}

// A round is the strategy's communication period. Every built-in strategy
// with rounds calls it H, so the runtime reads that option rather than ask
// each strategy through the SDK (a new virtual function would change the
// plugin ABI); a strategy without H (DDP, SPARTA, DeMo, DES-LOC) needs
// participation.round.
int64_t participation_round(const manifest::Manifest& m, const json& strategy_options) {
  if (!m.participation) return 0;
  if (m.participation->round) return *m.participation->round;
  const json H = strategy_options.is_object() && strategy_options.contains("H") ? strategy_options.at("H") : json();
  if (H.is_number_integer() && H.get<int64_t>() >= 1) return H.get<int64_t>();
  throw sdk::ConfigError("participation.round", "strategy \"" + m.strategy.plugin +
                                                    "\" has no option H to take its round from: give the steps of "
                                                    "a round, such as \"round\": 10");
}

}  // namespace

TrainingPlugins load_plugins(const manifest::Manifest& m, plugin::PluginLoader& loader) {
  TrainingPlugins plugins;
  plugins.model = loader.load("model", m.model.plugin, m.model.path + ".plugin", m.base_dir);
  plugins.model_options = plugins.model->validate(m.model.options, m.model.path + ".options", m.base_dir);
  plugins.strategy = loader.load("strategy", m.strategy.plugin, m.strategy.path + ".plugin", m.base_dir);
  plugins.strategy_options = plugins.strategy->validate(m.strategy.options, m.strategy.path + ".options", m.base_dir);
  if (auto warning = uninherited_options(m.model, *plugins.model)) plugins.warnings.push_back(*warning);
  if (auto warning = uninherited_options(m.strategy, *plugins.strategy)) plugins.warnings.push_back(*warning);
  plugins.round_steps = participation_round(m, plugins.strategy_options);
  return plugins;
}

bool eval_enabled(const manifest::Manifest& m) { return m.val_data.has_value() && m.eval_size > 0; }

TrainingData load_data(const manifest::Manifest& m, plugin::PluginLoader& loader, const ProcessRole& role,
                       DatasetCache* cache, const nlohmann::json& model_options) {
  const std::optional<int64_t> num_classes = data::model_num_classes(model_options);
  const auto started = std::chrono::steady_clock::now();
  const dist::NodeBlock& block = role.block;
  TrainingData d;
  if (per_node_dataset(m.train_data, loader, m)) {
    if (m.has_population()) {
      throw sdk::ConfigError(m.train_data.json_path + ".dataset",
                             "\"" + m.train_data.dataset +
                                 "\" gives each node a dataset of its own, which a population of clients larger "
                                 "than the nodes (participation.clients) cannot share out");
    }
    load_node_datasets(m, loader, role, cache, num_classes, d);
  } else {
    d.train = make_dataset(m.train_data, loader, m, d.train_options, block, cache);
    prepare_sampling(m, d, num_classes);
  }
  if (eval_enabled(m)) {
    d.val = make_dataset(*m.val_data, loader, m, d.val_options, block, cache);
    d.val_indices = data::validation_indices(d.val->size(), m.eval_size);
  }
  d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return d;
}

}  // namespace exogym::runtime::train
