#pragma once
// "seeds": every run of a manifest repeated once per seed, so that a
// comparison shows how much of a difference is noise. Each repetition is an
// ordinary run whose "seed" is one of the seeds: its config.json is the
// manifest of a plain run with that seed, and it trains bit for bit as that
// run would.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exogym/runtime/manifest/manifest.h"

namespace exogym::runtime::manifest {

// Removes "seeds" from the manifest document `base` (overrides applied,
// "runs" already taken out as `runs`) and returns it: empty when absent or
// null. Throws sdk::ConfigError naming the JSON path for a list that is not
// a non-empty list of distinct non-negative integers, for "seed" beside it,
// and for a variant that sets "seed" or "seeds" itself.
std::vector<uint64_t> take_seeds(nlohmann::json& base, const nlohmann::json& runs);

// Each run of `runs` once per seed, in that order (all seeds of the first
// run, then the next): the seed replaced, the folder a seed-N folder.
std::vector<Manifest> repeat_per_seed(const std::vector<Manifest>& runs, const std::vector<uint64_t>& seeds);

// exogym-run --seeds 1,2,3: the seeds, checked as "seeds" is; errors name
// the flag.
std::vector<uint64_t> parse_seed_list(const std::string& text);

// The --set assignments that make `seeds` the manifest's seeds, replacing
// its "seed" and "seeds".
std::vector<std::string> seed_overrides(const std::vector<uint64_t>& seeds);

}  // namespace exogym::runtime::manifest
