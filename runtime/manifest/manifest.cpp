#include "exogym/runtime/manifest/manifest.h"

#include "exogym/runtime/manifest/document.h"
#include "exogym/runtime/manifest/overrides.h"
#include "exogym/runtime/manifest/reader.h"
#include "exogym/runtime/manifest/seeds.h"
#include "exogym/runtime/manifest/variants.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"

namespace exogym::runtime::manifest {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path absolute_dir(const fs::path& dir) {
  fs::path out = dir.empty() ? fs::current_path() : fs::absolute(dir);
  out = out.lexically_normal();
  if (!out.has_filename() && out.has_relative_path()) out = out.parent_path();
  return out;
}

}  // namespace

fs::path Manifest::run_subdir() const {
  fs::path dir = variant.empty() ? fs::path() : fs::path(variant);
  return seeded ? dir / ("seed-" + std::to_string(seed)) : dir;
}

fs::path Manifest::run_dir() const {
  const fs::path sub = run_subdir();
  return sub.empty() ? output_dir / name : output_dir / name / sub;
}

ManifestSet parse_manifest(const json& doc, const fs::path& base_dir, const std::string& default_name,
                           const std::vector<std::string>& overrides) {
  if (!doc.is_object()) throw sdk::ConfigError("", "a manifest must be a JSON object, got " + sdk::json_excerpt(doc));
  const fs::path dir = absolute_dir(base_dir);
  json base = doc;
  for (const auto& assignment : overrides) apply_override(base, assignment);
  // The manifest before --set: variants patch it (then --set again, which
  // wins), and what a --set switches is told from it.
  json unset = doc;
  unset.erase("runs");
  unset.erase("$schema");
  // Where an editor finds the manifest's JSON Schema (json_schema.h): not a
  // setting of the run.
  base.erase("$schema");
  const json runs = base.value("runs", json());
  base.erase("runs");
  const std::vector<uint64_t> seeds = take_seeds(base, runs);

  ManifestSet set;
  set.has_variants = !runs.is_null();
  if (set.has_variants) {
    set.runs = read_variants(unset, runs, dir, default_name, overrides);
  } else {
    set.runs.push_back(read_run(base, dir, default_name, ""));
    note_overridden_plugins(unset, json::object(), overrides, set.runs.back());
  }
  set.name = set.runs.front().name;
  if (!seeds.empty()) {
    set.seeds = seeds;
    set.runs = repeat_per_seed(set.runs, seeds);
  }
  return set;
}

ManifestSet load_manifest(const fs::path& file, const std::vector<std::string>& overrides) {
  return parse_manifest(read_json_document(file), absolute_dir(fs::absolute(file).parent_path()), file.stem().string(),
                        overrides);
}

}  // namespace exogym::runtime::manifest
