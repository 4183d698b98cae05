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
// manifest without "runs"), then `overrides` again so that --set wins over
// the variant's values. A variant is named by its "name", else after its
// strategy plugin. Errors at a key the variant sets name it (runs[1].nodes);
// faults of the base keep the base's path and say which variant showed them.
// `error` with the variant that showed it: "... (in variant "ddp")". The one
// wording of every error of a variant, whether the manifest, a plugin's
// declared options, or the plugin itself (its constructor, init()) found it.
sdk::ConfigError in_variant(const sdk::ConfigError& error, const std::string& variant);

std::vector<Manifest> read_variants(const nlohmann::json& base, const nlohmann::json& runs,
                                    const std::filesystem::path& base_dir, const std::string& default_name,
                                    const std::vector<std::string>& overrides);

}  // namespace exogym::runtime::manifest
