#include "exogym/runtime/runner.h"

#include <algorithm>
#include <map>

#include "exogym/runtime/comparison.h"
#include "exogym/runtime/plugin_loader.h"
#include "exogym/runtime/run_writer.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime {

namespace fs = std::filesystem;

RunnerResult run_manifest_set(const ManifestSet& set, PluginLoader& loader, const RunnerOptions& options) {
  std::vector<const Manifest*> selected;
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
      check_run(*run, loader);
    } catch (const sdk::ConfigError& e) {
      if (!set.has_variants) throw;
      throw sdk::ConfigError(e.path(), e.message() + " (in variant \"" + run->variant + "\")");
    }
  }

  RunnerResult result;
  std::map<std::string, std::shared_ptr<const sdk::Dataset>> datasets;
  if (set.has_variants) {
    result.folder = unique_folder(selected.empty() ? fs::path() : selected.front()->run_dir().parent_path());
  }
  for (const auto* run : selected) {
    RunOptions run_options;
    run_options.progress = options.progress;
    run_options.dataset_cache = &datasets;
    if (set.has_variants) run_options.run_dir = result.folder / run->variant;
    result.runs.push_back(train_run(*run, loader, run_options));
    if (!set.has_variants) result.folder = result.runs.back().run_dir;
  }
  if (set.has_variants && !result.runs.empty()) {
    result.table = comparison_table(result.runs);
    write_file_atomically(result.folder / "comparison.csv", comparison_csv(result.runs));
    write_file_atomically(result.folder / "comparison.txt", result.table);
  }
  return result;
}

}  // namespace exogym::runtime
