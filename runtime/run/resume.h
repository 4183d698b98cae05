#pragma once
// `exogym-run --resume RUN_FOLDER`: the run to continue, read back from the
// folder's config.json (the resolved manifest it was started with), with
// --set overrides applied over it. Whether the overrides keep the run exact
// is checked against the checkpoint when the run starts
// (train/checkpointing.h).
#include <filesystem>
#include <string>
#include <vector>

#include "exogym/runtime/manifest/manifest.h"

namespace exogym::runtime::run {

// sdk::DataError naming the folder when it is not a run folder (a folder of
// variants included: each variant is resumed on its own), sdk::ConfigError
// for a bad override.
manifest::ManifestSet resumed_manifest(const std::filesystem::path& run_dir, const std::vector<std::string>& overrides);

}  // namespace exogym::runtime::run
