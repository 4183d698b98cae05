#pragma once
// Runs every run of a manifest (one, or each variant of "runs") and, for
// variants, writes the side-by-side comparison.
#include <filesystem>
#include <string>
#include <vector>

#include "exogym/runtime/manifest.h"
#include "exogym/runtime/training.h"

namespace exogym::runtime {

struct RunnerOptions {
  Progress::Mode progress = Progress::Mode::Lines;
  std::vector<std::string> only;  // variant names to run; empty: all
  // Over several processes: see RunOptions. Only process 0 writes folders.
  ProcessMesh* mesh = nullptr;
  bool partial_reduce = false;
  int cores = 0;
};

struct RunnerResult {
  std::filesystem::path folder;  // the run folder, or the folder holding the variants
  std::vector<RunResult> runs;
  std::string table;  // the comparison table (variants only)
};

RunnerResult run_manifest_set(const ManifestSet& set, PluginLoader& loader, const RunnerOptions& options);

// What the processes of a run must agree on: the selected runs' settings,
// without the paths that may differ between hosts (output folder, data
// paths). A hex digest.
std::string run_fingerprint(const ManifestSet& set, const std::vector<std::string>& only);

}  // namespace exogym::runtime
