#pragma once
// Declaring and validating options. Each plugin lists its options (name,
// type, default, doc); the loader validates the manifest's "options" object
// against that list before the plugin sees it, so a misspelt or ill-typed
// option is an error naming its JSON path, never silently ignored. The
// manifest's own sections are declared and validated the same way.
#include <cstdint>
#include <limits>
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
  String,          // see OptionSpec::choices
  NonEmptyString,  // a name or a path, where "" is always a mistake
  Path,            // a file or folder, made absolute against the manifest's folder
  IntegerList,     // list of positive integers
  List,            // a JSON array whose items follow OptionSpec::fields[0]
  ChoiceSet,       // some of OptionSpec::choices: a list of them (each at most
                   // once), true for all of them or false for none; kept as given
  Optimizer,       // "adamw" or {"name": "adamw", "lr": ...}; see optim.h
  LrSchedule,      // {"name": "cosine", "warmup_steps": 100}; see optim.h
  Object,          // any JSON object, validated by the plugin
  Section,         // a JSON object whose keys are OptionSpec::fields
  Table,           // a JSON object keyed by names the user chooses (e.g. node
                   // ranks); every value follows OptionSpec::fields[0]
  Tagged,          // one of several kinds, each a Section of OptionSpec::fields
                   // named by the kind: either the kind's name ("iid", when
                   // the kind has no required key) or {"name": kind, ...keys}
  Any,
};

const char* to_string(OptionType type);

struct OptionSpec;
using OptionSpecs = std::vector<OptionSpec>;

struct OptionSpec {
  std::string name;
  OptionType type = OptionType::Any;
  // Used when the manifest omits the option. null means "not set" (e.g. no
  // gradient clipping) unless `required` is true. A Section with an object
  // default is always present, its own defaults filled in.
  nlohmann::json default_value = nullptr;
  std::string doc;
  std::vector<std::string> choices = {};  // allowed values of a String option, or a ChoiceSet's
  bool required = false;
  // Integer types: the largest value accepted, above INT64_MAX only for
  // seeds (read as uint64_t); an option read as an int declares INT_MAX.
  uint64_t maximum = std::numeric_limits<int64_t>::max();
  // What the value is, in words, where the type's name says too little:
  // messages then read "expected a <noun>, got ...", e.g. "bandwidth with a
  // unit such as \"1Gbit/s\"" for a String its reader parses further.
  std::string noun = {};
  // Section: the keys it accepts. Table and List: the one spec every value
  // follows (its name is a placeholder for the key, e.g. "<node>"). Tagged:
  // one Section per kind, named by the kind.
  OptionSpecs fields = {};
};

// What validation makes of an option that is unset (absent or null) and has
// no default.
enum class Unset {
  Null,  // null: the resolved options list every declared option
  Omit,  // left out: the resolved manifest shows only what is set
};

// Checks `given` (a JSON object or null) against `specs` and returns the
// resolved options: every declared option present (unset ones as `unset`
// says), defaults filled in, optimizer specs and schedules written out in
// full, sections resolved the same way. Throws ConfigError naming `path` +
// "." + option for unknown, missing or ill-typed options.
nlohmann::json validate_options(const nlohmann::json& given, const OptionSpecs& specs, const std::string& path,
                                Unset unset = Unset::Null);

// The specs as JSON, one object per option: name, type, default, doc and,
// where declared, choices, required, maximum, noun and nested fields.
nlohmann::json describe_options(const OptionSpecs& specs);

// Helpers for plugins that validate their own Object options with the same
// wording. closest_name: the known name a misspelt or abbreviated `given`
// most likely meant ("" when none is close). json_excerpt: `value` as
// compact JSON, shortened to fit in an error message.
std::string closest_name(const std::string& given, const std::vector<std::string>& known);
std::string json_excerpt(const nlohmann::json& value);

}  // namespace exogym::sdk
