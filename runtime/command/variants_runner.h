#pragma once
// Runs every run of a manifest (one, or each variant of "runs") and, for
// variants, writes the side-by-side comparison.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/train/training.h"

namespace exogym::runtime::command {

struct VariantsOptions {
  output::Progress::Mode progress = output::Progress::Mode::Lines;
  std::vector<std::string> only;  // variant names to run; empty: all
  // Over several processes: see TrainingOptions. Only process 0 writes folders.
  dist::ProcessMesh* mesh = nullptr;
  bool partial_reduce = false;
  int cores = 0;
  int host_processes = 1;  // see TrainingOptions
  bool force = false;      // see TrainingOptions
  // Non-empty: continue the run in this folder (TrainingOptions::resume).
  std::filesystem::path resume_dir;
  std::optional<int64_t> from_step;
};

struct VariantsResult {
  std::filesystem::path folder;  // the run folder, or the folder holding the variants
  std::vector<train::TrainingResult> runs;
  std::string table;  // the comparison table (variants only)
};

VariantsResult run_variants(const manifest::ManifestSet& set, plugin::PluginLoader& loader,
                            const VariantsOptions& options);

// What the processes of a run must agree on: the selected runs' settings,
// without the paths that may differ between hosts (output folder, data
// paths). A hex digest.
std::string run_fingerprint(const manifest::ManifestSet& set, const std::vector<std::string>& only);

}  // namespace exogym::runtime::command
