#pragma once
// Reading one run: a manifest without "runs" (a plain manifest, or a base
// merged with one variant) into a Manifest.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "exogym/runtime/manifest/manifest.h"

namespace exogym::runtime::manifest {

// Validates `doc` against the manifest's schema (schema.h), checks what the
// schema cannot express (syntax.h, units.h, keys that must agree), and fills
// in every default. Relative paths resolve against `base_dir` (absolute);
// `default_name` names the run when `doc` does not. Throws sdk::ConfigError
// naming the JSON path at fault.
Manifest read_run(const nlohmann::json& doc, const std::filesystem::path& base_dir, const std::string& default_name,
                  const std::string& variant);

}  // namespace exogym::runtime::manifest
