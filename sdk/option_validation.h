#pragma once
// Validating and describing options against their specs (options.h): what the loader does with a
// plugin's options and the manifest's reader with its sections, before anyone sees them; and the words
// of its messages, for a plugin that checks an Object option of its own.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exogym/sdk/options.h"

namespace exogym::sdk {

// What validation makes of an option that is unset (absent or null) and has no default.
enum class Unset {
  Null,  // null: the resolved options list every declared option
  Omit,  // left out: the resolved manifest shows only what is set
};

// Checks `given` (a JSON object or null) against `specs` and returns the resolved options: every
// declared option present (unset ones as `unset` says), defaults filled in, optimizer specs and
// schedules written out in full, sections resolved the same way. Throws ConfigError naming `path` +
// "." + option for unknown, missing or ill-typed options.
nlohmann::json validate_options(const nlohmann::json& given, const OptionSpecs& specs, const std::string& path,
                                Unset unset = Unset::Null);

// The specs as JSON, one object per option: name, type, default, doc and, where declared, choices,
// required, maximum, noun and nested fields.
nlohmann::json describe_options(const OptionSpecs& specs);

// The optimizers OptimizerSpec::from_json accepts (optim.h), their hyper-parameters' names, types and
// defaults, for the docs and the manifest's schema.
nlohmann::json describe_optimizers();

// `value` as compact JSON, shortened to fit in an error message.
std::string json_excerpt(const nlohmann::json& value);
// The known name a misspelt or abbreviated `given` most likely meant ("" when none is close).
std::string closest_name(const std::string& given, const std::vector<std::string>& known);

}  // namespace exogym::sdk
