#include "exogym/runtime/manifest/variants.h"

#include <algorithm>
#include <sstream>

#include "exogym/runtime/manifest/overrides.h"
#include "exogym/runtime/manifest/patch.h"
#include "exogym/runtime/manifest/reader.h"
#include "exogym/runtime/manifest/syntax.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"

namespace exogym::runtime::manifest {

namespace fs = std::filesystem;
using nlohmann::json;
using sdk::ConfigError;
using sdk::json_excerpt;

namespace {

std::string entry_path(size_t index) { return "runs[" + std::to_string(index) + "]"; }

// A variant named after its strategy reads well in the summary ("ddp",
// "diloco"); a plugin given as a file is named after the file.
std::string default_variant_name(const json& entry, size_t index) {
  auto strategy = entry.find("strategy");
  if (strategy != entry.end() && strategy->is_object()) {
    auto plugin = strategy->find("plugin");
    if (plugin != strategy->end() && plugin->is_string() && !plugin->get<std::string>().empty()) {
      std::string name = plugin->get<std::string>();
      const bool is_file =
          name.find('/') != std::string::npos || (name.size() > 3 && name.compare(name.size() - 3, 3, ".so") == 0);
      if (!is_file) return name;
      name = fs::path(name).stem().string();
      const std::string prefix = "exogym_strategy_";
      if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0) name = name.substr(prefix.size());
      return name;
    }
  }
  return "run" + std::to_string(index);
}

// The files the comparison writes beside the variants' folders (variants_runner.cpp).
bool is_reserved_variant_name(const std::string& name) {
  return name == "comparison.csv" || name == "comparison.txt" || name == "report.html" || name == "variants.json";
}

std::string variant_name(const json& entry, size_t index) {
  const std::string path = entry_path(index) + ".name";
  auto given = entry.find("name");
  const bool named = given != entry.end() && !given->is_null();
  if (named) check_folder_name(*given, path);
  const std::string name = named ? given->get<std::string>() : default_variant_name(entry, index);
  if (!named && !is_folder_name(name)) {
    throw ConfigError(
        path, "not set, and the default " + json_excerpt(name) + " is not a " + kFolderNameNoun + "; set \"name\"");
  }
  if (is_reserved_variant_name(name)) {
    throw ConfigError(path, json_excerpt(name) + " is reserved: the comparison writes a file of that name beside the " +
                                "variants' folders");
  }
  return name;
}

struct Variant {
  std::string name;
  json patch;  // the entry without its name, which names the variant, not the run
};

// Names first: a duplicate is reported as such, before whatever else may be
// wrong inside the variants.
std::vector<Variant> list_variants(const json& runs) {
  if (!runs.is_array()) throw ConfigError("runs", "expected an array of partial manifests, got " + json_excerpt(runs));
  if (runs.empty()) throw ConfigError("runs", "expected at least one variant, got []");
  std::vector<Variant> variants;
  for (size_t i = 0; i < runs.size(); ++i) {
    const json& entry = runs[i];
    const std::string path = entry_path(i);
    if (!entry.is_object())
      throw ConfigError(path, "expected an object (a partial manifest), got " + json_excerpt(entry));
    if (entry.contains("runs")) throw ConfigError(path + ".runs", "a variant cannot have variants of its own");
    Variant variant{variant_name(entry, i), entry};
    auto same =
        std::find_if(variants.begin(), variants.end(), [&](const Variant& v) { return v.name == variant.name; });
    if (same != variants.end()) {
      throw ConfigError(path + ".name", "duplicate variant name " + json_excerpt(variant.name) + " (" +
                                            entry_path(static_cast<size_t>(same - variants.begin())) +
                                            " has it too); give each variant a distinct \"name\"");
    }
    // All variants of one manifest share one folder: <output.dir>/<name>.
    if (entry.contains("output")) {
      throw ConfigError(path + ".output", "cannot differ between variants; set it in the base manifest");
    }
    variant.patch.erase("name");
    variants.push_back(std::move(variant));
  }
  return variants;
}

// The base's "model" or "strategy" object when the variant switches it to
// another plugin (which apply_patch starts from that plugin's defaults),
// else null.
json switched_section(const json& base, const json& patch, const char* section) {
  const json& patch_section = patch.contains(section) ? patch[section] : json();
  if (patch_section.is_object() && patch_section.contains("plugin") && base.contains(section) &&
      base[section].is_object() && base[section].value("plugin", json()) != patch_section["plugin"]) {
    return base[section];
  }
  return json();
}

// Whether a patch sets the value at a dotted JSON path (or deletes it with
// null, or replaces a named object holding it), i.e. whether an error there
// is the variant's doing.
bool patch_sets(const json& patch, const std::string& path) {
  const json* current = &patch;
  std::stringstream parts(path);
  std::string part;
  while (std::getline(parts, part, '.')) {
    if (!current->is_object()) return false;
    auto it = current->find(part);
    if (it == current->end()) return false;
    current = &*it;
    if (is_named(*current)) return true;
  }
  return true;
}

}  // namespace

void note_switched_plugins(const json& base, const json& patch, Manifest& run, const std::string& by) {
  for (const char* section : {"model", "strategy"}) {
    const json from = switched_section(base, patch, section);
    if (from.is_null()) continue;
    PluginRef& ref = std::string(section) == "model" ? run.model : run.strategy;
    const json plugin = from.value("plugin", json());
    ref.base_plugin = plugin.is_string() ? plugin.get<std::string>() : plugin.dump();
    ref.base_options = json::object();
    ref.switched_by = by;
    const json options = from.value("options", json::object());
    if (!options.is_object()) continue;
    for (const auto& [key, value] : options.items()) {
      if (!ref.options.is_object() || !ref.options.contains(key)) ref.base_options[key] = value;
    }
  }
}

void note_overridden_plugins(const json& base, const json& patch, const std::vector<std::string>& overrides,
                             Manifest& run) {
  json before = base;
  apply_patch(before, patch);
  for (const auto& assignment : overrides) {
    json after = before;
    apply_override(after, assignment);
    note_switched_plugins(before, after, run, "--set " + assignment);
    before = std::move(after);
  }
}

ConfigError in_variant(const ConfigError& error, const std::string& variant) {
  return ConfigError(error.path(), error.message() + " (in variant " + json_excerpt(variant) + ")");
}

std::vector<Manifest> read_variants(const json& base, const json& runs, const fs::path& base_dir,
                                    const std::string& default_name, const std::vector<std::string>& overrides) {
  const std::vector<Variant> variants = list_variants(runs);
  std::vector<Manifest> out;
  for (size_t i = 0; i < variants.size(); ++i) {
    json merged = base;
    apply_patch(merged, variants[i].patch);
    for (const auto& assignment : overrides) apply_override(merged, assignment);
    merged.erase("seeds");  // an override's, already taken by the manifest set (seeds.h)
    try {
      out.push_back(read_run(merged, base_dir, default_name, variants[i].name));
      note_switched_plugins(base, variants[i].patch, out.back(), "variant " + json_excerpt(variants[i].name));
      note_overridden_plugins(base, variants[i].patch, overrides, out.back());
    } catch (const ConfigError& error) {
      if (!error.path().empty() && patch_sets(variants[i].patch, error.path())) {
        throw ConfigError(entry_path(i) + "." + error.path(), error.message());
      }
      // The fault is in the base (or the combination): keep the base's path
      // and say which variant exposed it.
      throw in_variant(error, variants[i].name);
    }
  }
  return out;
}

}  // namespace exogym::runtime::manifest
