#pragma once
// The strategy tests' shared steps: small_manifest with a given strategy,
// and a run of a manifest into its own sub-folder.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "helpers.h"

namespace exogym::test {

// small_manifest(nodes) with strategy `plugin` and its `options`.
inline nlohmann::json with_strategy(int nodes, const std::string& plugin, const nlohmann::json& options) {
  nlohmann::json m = small_manifest(nodes);
  m["strategy"] = {{"plugin", plugin}, {"options", options}};
  return m;
}

// Trains `manifest` into dir/name/run; returns that run folder.
inline std::filesystem::path train_in(const nlohmann::json& manifest, const TempDir& dir, const std::string& name) {
  const std::filesystem::path sub = dir / name;
  std::filesystem::create_directories(sub);
  run_json(manifest, sub);
  return sub / "run";
}

}  // namespace exogym::test
