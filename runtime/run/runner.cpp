#include "exogym/runtime/run/runner.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/output/atomic_file.h"
#include "exogym/runtime/output/comparison.h"
#include "exogym/runtime/output/run_folder.h"
#include "exogym/runtime/output/run_writer.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/runtime/util/hash.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::run {

namespace fs = std::filesystem;

RunnerResult run_manifest_set(const manifest::ManifestSet& set, plugin::PluginLoader& loader,
                              const RunnerOptions& options) {
  std::vector<const manifest::Manifest*> selected;
  for (const auto& run : set.runs) {
    if (options.only.empty() ||
        std::find(options.only.begin(), options.only.end(), run.variant) != options.only.end()) {
      selected.push_back(&run);
    }
  }
  for (const auto& wanted : options.only) {
    bool found = false;
    for (const auto& run : set.runs) found = found || run.variant == wanted;
    if (!found) {
      std::string known;
      for (const auto& run : set.runs) known += " " + run.variant;
      throw sdk::ConfigError("--only", "no variant named \"" + wanted + "\" (variants:" + known + ")");
    }
  }
  // A typo in the last variant should not surface after the first trained.
  for (const auto* run : selected) {
    try {
      train::check_run(*run, loader, options.mesh ? options.mesh->size() : 1);
    } catch (const sdk::ConfigError& e) {
      if (!set.has_variants) throw;
      throw sdk::ConfigError(e.path(), e.message() + " (in variant \"" + run->variant + "\")");
    }
  }

  RunnerResult result;
  std::map<std::string, std::shared_ptr<const sdk::Dataset>> datasets;
  const bool writes = !options.mesh || options.mesh->rank() == 0;
  if (set.has_variants && writes && !selected.empty()) {
    result.folder = output::create_run_folder(selected.front()->run_dir().parent_path());
  }
  for (const auto* run : selected) {
    train::RunOptions run_options;
    run_options.progress = options.progress;
    run_options.dataset_cache = &datasets;
    run_options.mesh = options.mesh;
    run_options.partial_reduce = options.partial_reduce;
    run_options.cores = options.cores;
    if (set.has_variants && writes) run_options.run_dir = result.folder / run->variant;
    result.runs.push_back(train::train_run(*run, loader, run_options));
    if (!set.has_variants) result.folder = result.runs.back().run_dir;
  }
  if (set.has_variants && writes && !result.runs.empty()) {
    result.table = output::comparison_table(result.runs);
    output::write_file_atomically(result.folder / "comparison.csv", output::comparison_csv(result.runs));
    output::write_file_atomically(result.folder / "comparison.txt", result.table);
  }
  return result;
}

std::string run_fingerprint(const manifest::ManifestSet& set, const std::vector<std::string>& only) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& run : set.runs) {
    if (!only.empty() && std::find(only.begin(), only.end(), run.variant) == only.end()) continue;
    nlohmann::json settings = run.resolved;
    settings.erase("output");
    if (settings.contains("data")) {
      for (auto& [split, spec] : settings["data"].items()) {
        if (spec.is_object()) spec.erase("path");
      }
    }
    runs.push_back({{"variant", run.variant}, {"settings", settings}});
  }
  util::Fnv1a hash;
  hash.add(runs.dump());
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash.digest()));
  return text;
}

}  // namespace exogym::runtime::run
