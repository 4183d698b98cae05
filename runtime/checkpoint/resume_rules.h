#pragma once
// Which fields of a run's configuration may change between the run that
// wrote a checkpoint and the one that resumes it. A resumed run is exact
// (the same model.pt and CSVs as a run that never stopped) when everything
// else is the same; these change only what is measured or kept, how fast it
// runs, or how long it goes on: train.max_steps (extends a run; a schedule
// that follows max_steps follows the new value), eval.*, checkpoint.*,
// output.*, parallelism, threads, pin_threads, data.*.path (the data moved),
// and name.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace exogym::runtime::checkpoint {

// The changeable fields, as JSON paths ("train.max_steps", "eval", ...).
const std::vector<std::string>& changeable_fields();

// `config` (a config.json) without the changeable fields and without the
// runtime's notes ("runtime").
nlohmann::json exact_settings(const nlohmann::json& config);

// A hex FNV-1a digest of `settings`, the same on every host.
std::string settings_hash(const nlohmann::json& settings);

struct Difference {
  std::string path;              // "strategy.options.H"
  nlohmann::json before, after;  // null where absent
};

// The first field (in key order) where `before` and `after` differ.
std::optional<Difference> first_difference(const nlohmann::json& before, const nlohmann::json& after);

}  // namespace exogym::runtime::checkpoint
