#include "exogym/runtime/train/setup.h"

#include <chrono>
#include <string>

#include "exogym/runtime/data/registry.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::train {

using nlohmann::json;

namespace {

// What defines a dataset: a run whose datasets have the same key reuses them.
std::string dataset_key(const manifest::DataSpec& spec, const json& resolved_options, const manifest::Manifest& m,
                        const dist::NodeBlock& block) {
  return spec.dataset + "|" + spec.path.string() + "|" + spec.split + "|" + resolved_options.dump() + "|" +
         std::to_string(m.seed) + "|" + std::to_string(m.nodes) + "|" + std::to_string(block.first) + "+" +
         std::to_string(block.count);
}

std::shared_ptr<const sdk::Dataset> make_dataset(const manifest::DataSpec& spec, plugin::PluginLoader& loader,
                                                 const manifest::Manifest& m, json& resolved_options,
                                                 const dist::NodeBlock& block, DatasetCache* cache) {
  sdk::DatasetRequest request;
  request.path = spec.path;
  request.split = spec.split;
  request.seed = m.seed;
  request.first_node = block.first;
  request.local_nodes = block.count;
  request.num_nodes = m.nodes;
  const std::string options_path = spec.json_path + ".options";
  try {
    std::shared_ptr<plugin::LoadedPlugin> plugin;
    if (auto specs = data::builtin_dataset_options(spec.dataset)) {
      resolved_options = sdk::validate_options(spec.options, *specs, options_path);
    } else {
      plugin = loader.load("dataset", spec.dataset, spec.json_path + ".dataset", m.base_dir);
      resolved_options = plugin->validate(spec.options, options_path);
    }
    const std::string key = dataset_key(spec, resolved_options, m, block);
    if (cache) {
      if (auto it = cache->find(key); it != cache->end()) return it->second;
    }
    std::shared_ptr<const sdk::Dataset> dataset =
        plugin ? plugin->create_dataset(resolved_options, request)
               : data::make_builtin_dataset(spec.dataset, resolved_options, request);
    if (cache) (*cache)[key] = dataset;
    return dataset;
  } catch (const sdk::DataError& e) {
    throw sdk::ConfigError(spec.json_path + ".path", e.what());
  } catch (const sdk::ConfigError& e) {
    // A dataset's own errors: an empty path is its split, else an option.
    if (e.path().rfind(spec.json_path, 0) == 0) throw;
    throw sdk::ConfigError(spec.json_path + (e.path().empty() ? ".split" : ".options." + e.path()), e.message());
  }
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

RunPlugins load_plugins(const manifest::Manifest& m, plugin::PluginLoader& loader) {
  RunPlugins plugins;
  plugins.model = loader.load("model", m.model.plugin, m.model.path + ".plugin", m.base_dir);
  plugins.model_options = plugins.model->validate(m.model.options, m.model.path + ".options");
  plugins.strategy = loader.load("strategy", m.strategy.plugin, m.strategy.path + ".plugin", m.base_dir);
  plugins.strategy_options = plugins.strategy->validate(m.strategy.options, m.strategy.path + ".options");
  return plugins;
}

bool eval_enabled(const manifest::Manifest& m) { return m.val_data.has_value() && m.eval_size > 0; }

RunData load_data(const manifest::Manifest& m, plugin::PluginLoader& loader, const dist::NodeBlock& block,
                  DatasetCache* cache) {
  const auto started = std::chrono::steady_clock::now();
  RunData d;
  d.train = make_dataset(m.train_data, loader, m, d.train_options, block, cache);
  d.sampler = data::make_sampler(m.train_data.partition, d.train->size(), m.nodes, m.batch_size, m.seed);
  if (eval_enabled(m)) {
    d.val = make_dataset(*m.val_data, loader, m, d.val_options, block, cache);
    d.val_indices = data::validation_indices(d.val->size(), m.eval_size);
  }
  d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return d;
}

}  // namespace exogym::runtime::train
