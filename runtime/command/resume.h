#pragma once
// `exogym-run --resume FOLDER`: the run to continue, read back from the
// folder's config.json (the resolved manifest it was started with), or, for a
// folder of variants, from its variants.json, with --set overrides applied
// over it. Whether the overrides keep a run exact is checked against its
// checkpoint when it starts (train/checkpointing.h).
#include <filesystem>
#include <string>
#include <vector>

#include "exogym/runtime/manifest/manifest.h"

namespace exogym::runtime::plugin {
class PluginLoader;
}

namespace exogym::runtime::command {

// sdk::DataError naming the folder when it is neither a run folder nor a
// folder of variants that has variants.json; sdk::ConfigError for a bad
// override (naming the variant).
manifest::ManifestSet resumed_manifest(const std::filesystem::path& folder, const std::vector<std::string>& overrides);

// The plugin files the runs in `folder` loaded (config.json's
// runtime.plugin_files, of the folder or of its variants' folders), so
// that --resume searches their folders after the ones --plugin-path gives:
// a run started with --plugin-path resumes with the command its interrupt
// printed. The folders are added to `loader`; a recorded file that is gone,
// of a plugin the search path no longer finds, is an sdk::ConfigError at
// "--resume" naming the file and how to point at it.
void find_recorded_plugins(const std::filesystem::path& folder, plugin::PluginLoader& loader);

// variants.json: written into a comparison's folder (variants, seeds)
// before its first run starts, so that an interrupted comparison can be
// resumed as a whole, runs not yet started included. Each run's variant,
// whether it is one of "seeds", and its resolved manifest, in the order
// they run.
void write_variants_record(const std::filesystem::path& folder, const std::vector<const manifest::Manifest*>& runs);

// Where each run of a resumed comparison starts (`run_dir`: its folder).
enum class VariantStart {
  Fresh,     // never started: trains from step 0 into its folder
  Resume,    // started and stopped: continues from its newest checkpoint
  Finished,  // has its summary for the steps asked: read back, not trained
};
VariantStart variant_start(const std::filesystem::path& run_dir, const manifest::Manifest& run);

}  // namespace exogym::runtime::command
