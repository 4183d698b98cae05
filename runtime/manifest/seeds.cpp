#include "exogym/runtime/manifest/seeds.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "exogym/runtime/manifest/schema.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"

namespace exogym::runtime::manifest {

using nlohmann::json;
using sdk::ConfigError;

namespace {

const sdk::OptionSpec& seeds_spec() {
  const auto& schema = manifest_schema();
  const auto it =
      std::find_if(schema.begin(), schema.end(), [](const sdk::OptionSpec& s) { return s.name == "seeds"; });
  EXOGYM_CHECK_INTERNAL(it != schema.end(), "the manifest schema declares no \"seeds\"");
  return *it;
}

// A variant runs with the base's seeds: its own would silently lose.
void reject_variant_seeds(const json& runs) {
  if (!runs.is_array()) return;  // read_variants reports it
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].is_object()) continue;
    for (const char* key : {"seed", "seeds"}) {
      if (runs[i].contains(key)) {
        throw ConfigError("runs[" + std::to_string(i) + "]." + key,
                          "cannot differ between variants when the manifest sets \"seeds\": every variant runs once "
                          "per seed");
      }
    }
  }
}

}  // namespace

std::vector<uint64_t> take_seeds(json& base, const json& runs) {
  if (!base.contains("seeds")) return {};
  const json given = base["seeds"];
  base.erase("seeds");
  if (given.is_null()) return {};
  // The declared spec checks the type and each item, with the usual wording.
  const json checked = sdk::validate_options(json{{"seeds", given}}, {seeds_spec()}, "").at("seeds");
  if (checked.empty()) throw ConfigError("seeds", "expected at least one seed, got []");
  std::vector<uint64_t> seeds;
  for (size_t i = 0; i < checked.size(); ++i) {
    const uint64_t seed = checked[i].get<uint64_t>();
    const auto same = std::find(seeds.begin(), seeds.end(), seed);
    if (same != seeds.end()) {
      throw ConfigError("seeds[" + std::to_string(i) + "]", "duplicate seed " + std::to_string(seed) + " (seeds[" +
                                                                std::to_string(same - seeds.begin()) +
                                                                "] has it too): a seed run twice is the same run");
    }
    seeds.push_back(seed);
  }
  if (base.contains("seed") && !base["seed"].is_null()) {
    throw ConfigError("seed", "set either \"seed\" or \"seeds\", not both (exogym-run --seeds replaces both)");
  }
  reject_variant_seeds(runs);
  return seeds;
}

std::vector<Manifest> repeat_per_seed(const std::vector<Manifest>& runs, const std::vector<uint64_t>& seeds) {
  std::vector<Manifest> out;
  for (const auto& run : runs) {
    for (const uint64_t seed : seeds) {
      Manifest repeat = run;
      repeat.seed = seed;
      repeat.seeded = true;
      repeat.resolved["seed"] = seed;
      out.push_back(std::move(repeat));
    }
  }
  return out;
}

std::vector<uint64_t> parse_seed_list(const std::string& text) {
  json list = json::array();
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const bool digits = !item.empty() && item.size() <= 20 && item.find_first_not_of("0123456789") == std::string::npos;
    uint64_t value = 0;
    bool fits = digits;
    for (char c : item) {
      const uint64_t digit = static_cast<uint64_t>(c - '0');
      fits = fits && value <= (UINT64_MAX - digit) / 10;
      if (fits) value = value * 10 + digit;
    }
    if (!fits) {
      throw ConfigError("--seeds", "expected comma-separated non-negative integers such as 1,2,3, got " +
                                       sdk::json_excerpt(text) + " (" + sdk::json_excerpt(item) + " is not one)");
    }
    list.push_back(value);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  json doc = {{"seeds", list}};
  try {
    return take_seeds(doc, json());
  } catch (const ConfigError& e) {
    throw ConfigError("--seeds", e.message());
  }
}

std::vector<std::string> seed_overrides(const std::vector<uint64_t>& seeds) {
  if (seeds.empty()) return {};
  return {"seed=null", "seeds=" + json(seeds).dump()};
}

}  // namespace exogym::runtime::manifest
