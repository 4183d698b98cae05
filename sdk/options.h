#pragma once
// Declaring and validating a plugin's options. Each plugin lists its options
// (name, type, default, doc); the loader validates the manifest's "options"
// object against that list before the plugin sees it, so a misspelt or
// ill-typed option is an error naming its JSON path, never silently ignored.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace exogym::sdk {

enum class OptionType {
  Integer,
  PositiveInteger,     // >= 1
  NonNegativeInteger,  // >= 0
  Number,
  PositiveNumber,     // > 0
  NonNegativeNumber,  // >= 0
  Fraction,           // 0 < x <= 1
  Boolean,
  String,       // see OptionSpec::choices
  IntegerList,  // list of positive integers
  Optimizer,    // "adamw" or {"name": "adamw", "lr": ...}; see optim.h
  LrSchedule,   // {"name": "cosine", "warmup_steps": 100}; see optim.h
  Object,       // any JSON object, validated by the plugin
  Any,
};

const char* to_string(OptionType type);

struct OptionSpec {
  std::string name;
  OptionType type = OptionType::Any;
  // Used when the manifest omits the option. null means "not set" (e.g. no
  // gradient clipping) unless `required` is true.
  nlohmann::json default_value = nullptr;
  std::string doc;
  std::vector<std::string> choices = {};  // allowed values of a String option
  bool required = false;
};

using OptionSpecs = std::vector<OptionSpec>;

// Checks `given` (a JSON object or null) against `specs` and returns the
// resolved options: every declared option present, defaults filled in,
// optimizer specs and schedules written out in full. Throws ConfigError
// naming `path` + "." + option for unknown, missing or ill-typed options.
nlohmann::json validate_options(const nlohmann::json& given, const OptionSpecs& specs, const std::string& path);

// The specs as JSON (for --list-plugins and config.json).
nlohmann::json describe_options(const OptionSpecs& specs);

// Helpers for plugins that validate their own Object options with the same
// wording. closest_name: the known name a misspelt or abbreviated `given`
// most likely meant ("" when none is close). json_excerpt: `value` as
// compact JSON, shortened to fit in an error message.
std::string closest_name(const std::string& given, const std::vector<std::string>& known);
std::string json_excerpt(const nlohmann::json& value);

}  // namespace exogym::sdk
