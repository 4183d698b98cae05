#include "exogym/runtime/command/variants_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "exogym/runtime/command/comparison.h"
#include "exogym/runtime/command/resume.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/manifest/variants.h"
#include "exogym/runtime/output/report/report.h"
#include "exogym/runtime/output/run_folder.h"
#include "exogym/runtime/output/run_writer.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/runtime/util/atomic_file.h"
#include "exogym/runtime/util/hash.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::command {

namespace fs = std::filesystem;

namespace {

std::shared_ptr<spdlog::logger> variants_logger() {
  auto log = spdlog::get("exogym");
  return log ? log : spdlog::default_logger();
}

std::string comparison_title(const manifest::ManifestSet& set) {
  return set.runs.empty() ? std::string("comparison") : set.runs.front().name + ": comparison";
}

// After a variant failed or was interrupted: the report of the variants that
// ran, the stopped one included. Never throws over the run's own error.
void write_stopped_comparison_report(const manifest::ManifestSet& set, const fs::path& folder,
                                     const std::vector<fs::path>& variant_dirs) noexcept {
  try {
    std::vector<fs::path> started;
    for (const auto& dir : variant_dirs) {
      if (fs::exists(dir / "config.json")) started.push_back(dir);
    }
    if (!started.empty()) output::report::write_report(started, folder / "report.html", comparison_title(set));
  } catch (const std::exception& e) {
    if (auto log = spdlog::get("exogym")) log->warn("no report.html for {}: {}", folder.string(), e.what());
  }
}

// The runs --only names (all without it), each checked before any trains.
std::vector<const manifest::Manifest*> selected_runs(const manifest::ManifestSet& set, plugin::PluginLoader& loader,
                                                     const VariantsOptions& options) {
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
  std::vector<std::string> warned;
  for (const auto* run : selected) {
    try {
      // Each warning once, by the process that writes (a variant's seeds
      // would repeat it).
      for (const auto& warning : train::check_run(*run, loader, options.mesh ? options.mesh->size() : 1)) {
        if (std::find(warned.begin(), warned.end(), warning) != warned.end()) continue;
        warned.push_back(warning);
        if (!options.mesh || options.mesh->rank() == 0) variants_logger()->warn("{}", warning);
      }
    } catch (const sdk::ConfigError& e) {
      if (!set.has_variants) throw;
      throw manifest::in_variant(e, run->variant);
    }
  }
  return selected;
}

// A comparison that stopped: the report of what ran, or, when no variant
// left a folder (each run that fails before training removes its own), no
// comparison folder either, so that failed attempts leave no <name>-N.
void close_stopped_comparison(const manifest::ManifestSet& set, const fs::path& folder,
                              const std::vector<fs::path>& variant_dirs) noexcept {
  std::error_code ec;
  const bool any =
      std::any_of(variant_dirs.begin(), variant_dirs.end(), [&](const fs::path& dir) { return fs::exists(dir, ec); });
  if (any) return write_stopped_comparison_report(set, folder, variant_dirs);
  fs::remove_all(folder, ec);
}

// Rethrows the exception being handled; an option error with the variant
// it came from, worded as the checks before training word it.
[[noreturn]] void rethrow_in_variant(const manifest::ManifestSet& set, const manifest::Manifest& run) {
  try {
    throw;
  } catch (const sdk::ConfigError& e) {
    if (!set.has_variants) throw;
    throw manifest::in_variant(e, run.variant);
  }
}

}  // namespace

VariantsResult run_variants(const manifest::ManifestSet& set, plugin::PluginLoader& loader,
                            const VariantsOptions& options) {
  const std::vector<const manifest::Manifest*> selected = selected_runs(set, loader, options);
  VariantsResult result;
  train::DatasetCache datasets;
  const bool writes = !options.mesh || options.mesh->rank() == 0;
  const bool resumes = !options.resume_dir.empty();
  const bool compares = set.compares() && writes;
  if (resumes && set.compares() && options.from_step) {
    throw sdk::ConfigError("--from-step", "applies to one run; give the folder of the run to take back, e.g. " +
                                              (options.resume_dir / selected.front()->run_subdir()).string());
  }
  if (set.compares() && resumes) {
    result.folder = options.resume_dir;
  } else if (compares && !selected.empty()) {
    result.folder = output::create_run_folder(selected.front()->output_dir / selected.front()->name);
    write_variants_record(result.folder, selected);
  }
  // Decided before any run trains, so that every process of a run over
  // several decides the same whatever the others have written meanwhile.
  std::vector<VariantStart> starts;
  for (const auto* run : selected) {
    VariantStart start = resumes ? VariantStart::Resume : VariantStart::Fresh;
    if (set.compares() && resumes) start = variant_start(result.folder / run->run_subdir(), *run);
    starts.push_back(start);
  }
  std::vector<fs::path> variant_dirs;  // of the variants started, for the comparison's report
  for (size_t i = 0; i < selected.size(); ++i) {
    const manifest::Manifest* run = selected[i];
    train::TrainingOptions run_options;
    run_options.progress = options.progress;
    run_options.dataset_cache = &datasets;
    run_options.mesh = options.mesh;
    run_options.partial_reduce = options.partial_reduce;
    run_options.cores = options.cores;
    run_options.host_processes = options.host_processes;
    run_options.force = options.force;
    if (set.compares() && (writes || resumes)) run_options.run_dir = result.folder / run->run_subdir();
    if (compares) variant_dirs.push_back(run_options.run_dir);
    if (starts[i] == VariantStart::Finished) {
      if (writes) result.runs.push_back(train::read_run_result(run_options.run_dir));
      continue;
    }
    if (starts[i] == VariantStart::Resume) {
      run_options.resume = true;
      if (!set.compares()) run_options.run_dir = options.resume_dir;
      run_options.from_step = options.from_step;
    }
    try {
      result.runs.push_back(train::train_run(*run, loader, run_options));
      datasets.end_run();
    } catch (...) {
      if (compares && resumes) write_stopped_comparison_report(set, result.folder, variant_dirs);
      if (compares && !resumes) close_stopped_comparison(set, result.folder, variant_dirs);
      rethrow_in_variant(set, *run);
    }
    if (!set.compares()) result.folder = result.runs.back().run_dir;
  }
  if (compares && !result.runs.empty()) {
    result.table = command::comparison_table(result.runs);
    util::write_file_atomically(result.folder / "comparison.csv", command::comparison_csv(result.runs));
    util::write_file_atomically(result.folder / "comparison.txt", result.table);
    output::report::write_report(variant_dirs, result.folder / "report.html", comparison_title(set));
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
  return hash.hex();
}

}  // namespace exogym::runtime::command
