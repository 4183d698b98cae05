#pragma once
// "runs": the variants of a manifest, each a patch over the base (patch.h:
// a JSON merge patch in which named objects replace), so that comparing
// strategies is one manifest.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exogym/runtime/manifest/manifest.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::manifest {

// Reads one run per entry of `runs`: the entry merged over `base` (the
// manifest without "runs", before --set), then `overrides`, so that --set
// wins over the variant's values. A variant is named by its "name", else after its
// strategy plugin. Errors at a key the variant sets name it (runs[1].nodes);
// faults of the base keep the base's path and say which variant showed them.
// `error` with the variant that showed it: "... (in variant "ddp")". The one
// wording of every error of a variant, whether the manifest, a plugin's
// declared options, or the plugin itself (its constructor, init()) found it.
sdk::ConfigError in_variant(const sdk::ConfigError& error, const std::string& variant);

// Notes on `run` what a switch of plugin by `patch` over `base` left
// behind: the base's options the run does not set itself (the runtime names
// those the new plugin declares too, train/setup.h), and `by`, what
// switched ("variant \"ddp\"").
void note_switched_plugins(const nlohmann::json& base, const nlohmann::json& patch, Manifest& run,
                           const std::string& by);
// The same for each of `overrides` (--set) over `patch` over `base` that
// switches a plugin.
void note_overridden_plugins(const nlohmann::json& base, const nlohmann::json& patch,
                             const std::vector<std::string>& overrides, Manifest& run);

std::vector<Manifest> read_variants(const nlohmann::json& base, const nlohmann::json& runs,
                                    const std::filesystem::path& base_dir, const std::string& default_name,
                                    const std::vector<std::string>& overrides);

}  // namespace exogym::runtime::manifest
