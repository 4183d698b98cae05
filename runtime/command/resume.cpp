#include "exogym/runtime/command/resume.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <string>

#include "exogym/runtime/manifest/document.h"
#include "exogym/runtime/manifest/variants.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/runtime/util/atomic_file.h"
#include "exogym/runtime/util/regular_file.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::command {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kVariantsFile = "variants.json";

json read_document(const fs::path& file) {
  try {
    return manifest::read_json_document(file);
  } catch (const sdk::ConfigError& e) {
    throw sdk::DataError(file.string() + ": " + e.message());
  }
}

// A run's configuration as a manifest: the runtime's notes dropped.
json manifest_of(json config, const fs::path& file) {
  if (!config.is_object()) throw sdk::DataError(file.string() + ": not a run's configuration");
  config.erase("runtime");
  return config;
}

// Entry `i`'s configuration: its own "config", or the one of an earlier
// entry ("like", which has its own) with its "seed".
json entry_config(const json& entries, size_t i, const fs::path& file) {
  const json& entry = entries[i];
  if (entry.contains("config")) return manifest_of(entry["config"], file);
  const std::string at = file.string() + ": variants[" + std::to_string(i) + "]";
  if (!entry.contains("like") || !entry["like"].is_number_unsigned() || entry["like"].get<size_t>() >= i ||
      !entries[entry["like"].get<size_t>()].contains("config"))
    throw sdk::DataError(at + ": neither a \"config\" nor a \"like\" of an earlier entry with one");
  if (!entry.contains("seed") || !entry["seed"].is_number_integer())
    throw sdk::DataError(at + ".seed: expected an integer");
  json config = manifest_of(entries[entry["like"].get<size_t>()]["config"], file);
  config["seed"] = entry["seed"];
  return config;
}

manifest::ManifestSet resumed_variants(const fs::path& folder, const std::vector<std::string>& overrides) {
  const fs::path file = folder / kVariantsFile;
  const json doc = read_document(file);
  if (!doc.is_object() || !doc.contains("variants") || !doc["variants"].is_array() || doc["variants"].empty()) {
    throw sdk::DataError(file.string() + ": not a record of variants");
  }
  manifest::ManifestSet set;
  const json& entries = doc["variants"];
  for (size_t i = 0; i < entries.size(); ++i) {
    const json& entry = entries[i];
    if (!entry.is_object() || !entry.contains("variant") || !entry["variant"].is_string())
      throw sdk::DataError(file.string() + ": not a record of variants");
    const std::string variant = entry["variant"].get<std::string>();
    const json config = entry_config(entries, i, file);
    manifest::ManifestSet one;
    try {
      one = manifest::parse_manifest(config, folder / variant, config.value("name", folder.filename().string()),
                                     overrides);
    } catch (const sdk::ConfigError& e) {
      throw manifest::in_variant(e, variant);
    }
    manifest::Manifest run = std::move(one.runs.front());
    run.variant = variant;
    run.seeded = entry.value("seeded", false);
    set.has_variants = set.has_variants || !variant.empty();
    if (run.seeded && std::find(set.seeds.begin(), set.seeds.end(), run.seed) == set.seeds.end()) {
      set.seeds.push_back(run.seed);
    }
    set.runs.push_back(std::move(run));
  }
  set.name = set.runs.front().name;
  return set;
}

}  // namespace

manifest::ManifestSet resumed_manifest(const fs::path& folder, const std::vector<std::string>& overrides) {
  if (!fs::is_directory(folder)) throw sdk::DataError(folder.string() + ": no such folder");
  const fs::path config = folder / "config.json";
  if (!fs::exists(config)) {
    if (fs::exists(folder / kVariantsFile)) return resumed_variants(folder, overrides);
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(folder, ec)) {
      if (fs::exists(entry.path() / "config.json")) {
        // A comparison written before variants.json existed.
        throw sdk::DataError(folder.string() + ": a folder of variants without " + kVariantsFile +
                             "; resume one variant at a time, e.g. exogym-run --resume " + entry.path().string());
      }
    }
    throw sdk::DataError(folder.string() + ": not a run folder (no config.json)");
  }
  const json doc = manifest_of(read_document(config), config);
  const std::string name = doc.value("name", folder.filename().string());
  return manifest::parse_manifest(doc, folder, name, overrides);
}

void find_recorded_plugins(const fs::path& folder, plugin::PluginLoader& loader) {
  // The run's own config.json, or its variants' (and their seeds').
  std::vector<fs::path> configs;
  std::error_code ec;
  if (fs::exists(folder / "config.json", ec)) configs.push_back(folder / "config.json");
  // A comparison's runs: <variant>/, <variant>/seed-<N>/ or seed-<N>/.
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    if (!entry.is_directory(ec)) continue;
    if (fs::exists(entry.path() / "config.json", ec)) configs.push_back(entry.path() / "config.json");
    for (const auto& inner : fs::directory_iterator(entry.path(), ec)) {
      if (inner.is_directory(ec) && fs::exists(inner.path() / "config.json", ec))
        configs.push_back(inner.path() / "config.json");
    }
  }
  std::vector<fs::path> dirs;
  std::vector<std::pair<std::string, std::pair<std::string, fs::path>>> missing;  // kind, name, file
  for (const fs::path& config : configs) {
    json doc;
    try {
      doc = read_document(config);
    } catch (const sdk::DataError&) {
      continue;  // resumed_manifest names a damaged config.json
    }
    const json files = doc.is_object() && doc.contains("runtime") && doc["runtime"].is_object()
                           ? doc["runtime"].value("plugin_files", json::object())
                           : json::object();
    for (const char* kind : {"model", "strategy"}) {
      if (!files.is_object() || !files.contains(kind) || !files[kind].is_string()) continue;
      const fs::path file = files[kind].get<std::string>();
      if (fs::exists(file, ec)) {
        if (std::find(dirs.begin(), dirs.end(), file.parent_path()) == dirs.end()) dirs.push_back(file.parent_path());
      } else if (doc.contains(kind) && doc[kind].is_object() && doc[kind].value("plugin", json()).is_string()) {
        missing.push_back({kind, {doc[kind]["plugin"].get<std::string>(), file}});
      }
    }
  }
  loader.add_later_dirs(dirs);
  for (const auto& [kind, plugin] : missing) {
    try {
      loader.load(kind, plugin.first, std::string(kind) + ".plugin", folder);
    } catch (const sdk::Error& e) {
      // Not found (a ConfigError) or found but unloadable (a PluginError).
      throw sdk::ConfigError("--resume", "the run loaded its " + kind + " plugin \"" + plugin.first + "\" from " +
                                             plugin.second.string() +
                                             ", which is gone; build it there again, or give the folder it is in "
                                             "now with --plugin-path (" +
                                             e.what() + ")");
    }
  }
}

void write_variants_record(const fs::path& folder, const std::vector<const manifest::Manifest*>& runs) {
  // A run that differs from an earlier one only in its seed names that one
  // ("like") instead of repeating its whole manifest: 100,000 seeds wrote
  // 170 MB before the first run, now about 60 bytes a seed.
  std::map<std::string, size_t> first_of;  // a manifest without its seed, dumped: its first entry
  json variants = json::array();
  for (size_t i = 0; i < runs.size(); ++i) {
    const manifest::Manifest& run = *runs[i];
    json entry = {{"variant", run.variant}, {"seeded", run.seeded}};
    json unseeded = run.resolved;
    unseeded.erase("seed");
    const auto [it, first] = first_of.emplace(unseeded.dump(), i);
    if (first || !run.resolved.contains("seed")) {
      entry["config"] = run.resolved;
    } else {
      entry["like"] = it->second;
      entry["seed"] = run.resolved["seed"];
    }
    variants.push_back(std::move(entry));
  }
  fs::create_directories(folder);
  util::write_file_atomically(folder / kVariantsFile, json{{"variants", variants}}.dump(1) + "\n");
}

VariantStart variant_start(const fs::path& run_dir, const manifest::Manifest& run) {
  if (!fs::exists(run_dir / "config.json")) return VariantStart::Fresh;
  const fs::path file = run_dir / "summary.json";
  if (util::path_kind(file) == util::PathKind::Missing) return VariantStart::Resume;
  // Not a FIFO or a device: a DataError naming it rather than a hang.
  const json summary = json::parse(util::read_regular_file(file), nullptr, /*allow_exceptions=*/false);
  // A summary for fewer steps: the run is being extended (--set train.max_steps).
  const bool finished = summary.is_object() && summary.value("steps", int64_t{-1}) == run.max_steps;
  return finished ? VariantStart::Finished : VariantStart::Resume;
}

}  // namespace exogym::runtime::command
