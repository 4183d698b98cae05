#pragma once
// A checkpoint's index.json: what it was written by and for (the format,
// the step, the nodes and processes, the plugin ABI, the plugins, the
// manifest settings a resume must keep) and, one section per component, the
// run-wide state that is not per node ("outputs": the run folder's). Its
// presence in a folder named step-<N> is what makes a checkpoint complete:
// it is written last, then the folder is renamed into place.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace exogym::runtime::checkpoint {

struct CheckpointIndex {
  int64_t step = 0;  // steps completed
  int nodes = 0;
  int processes = 1;
  int abi = 0;  // EXOGYM_ABI_VERSION of the runtime that wrote it
  std::string exogym_version;
  std::string manifest_hash;                         // FNV-1a of `settings`
  nlohmann::json settings;                           // exact_settings() of the run's config.json
  nlohmann::json plugins = nlohmann::json::array();  // [{kind, name, version, abi, file}]
  // Run-wide state, one section per component (train/ writes "outputs").
  nlohmann::json sections = nlohmann::json::object();

  // With "digest": FNV-1a of the rest, which from_json checks.
  nlohmann::json to_json() const;
  // sdk::DataError naming `file` when a field is missing or of the wrong type.
  static CheckpointIndex from_json(const nlohmann::json& json, const std::filesystem::path& file);
  // Reads `folder`/index.json; sdk::DataError naming it when it cannot.
  static CheckpointIndex read(const std::filesystem::path& folder);
};

extern const char* const kIndexFile;  // "index.json"

// `index` with its "digest" set to the FNV-1a of its other fields, dumped
// (nlohmann's dump is canonical: sorted keys, shortest round-trip numbers).
nlohmann::json seal_index(nlohmann::json index);

}  // namespace exogym::runtime::checkpoint
