#pragma once
// Declaring options. Each plugin lists its options (name, type, default, doc); the loader validates the manifest's
// "options" object against the list before the plugin sees it (option_validation.h), so a misspelt or ill-typed option
// is an error naming its JSON path, never silently ignored.
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
  String,          // any, or one of `choices`
  NonEmptyString,  // a name or a path, where "" is always a mistake
  Path,            // a file or folder, made absolute against the manifest's folder
  IntegerList,     // a list of positive integers
  List,            // a JSON array whose items follow fields[0]
  ChoiceSet,       // some of `choices`: a list of them (each once), true for all or false for none
  Optimizer,       // "adamw" or {"name": "adamw", "lr": ...} (optim.h)
  LrSchedule,      // {"name": "cosine", "warmup_steps": 100} (optim.h)
  Object,          // any JSON object, validated by the plugin
  Section,         // a JSON object whose keys are `fields`
  Table,           // a JSON object keyed by names the user chooses (node ranks), each value as fields[0]
  Tagged,          // one of several kinds, each a Section in `fields` named by the kind: the kind's name
                   // ("iid", when it has no required key) or {"name": kind, ...keys}
  Any,
};
const char* to_string(OptionType type);

struct OptionSpec;
using OptionSpecs = std::vector<OptionSpec>;

struct OptionSpec {
  std::string name;
  OptionType type = OptionType::Any;
  // When the manifest omits it; null: unset, unless `required`. A Section's object default is always used.
  nlohmann::json default_value = nullptr;
  std::string doc;
  std::vector<std::string> choices = {};  // a String's allowed values, or a ChoiceSet's
  bool required = false;
  // Integer types: the largest value; above INT64_MAX only for seeds (uint64_t); INT_MAX for an int.
  uint64_t maximum = std::numeric_limits<int64_t>::max();
  // The value in words, for "expected a <noun>, got ..." ("bandwidth with a unit such as \"1Gbit/s\"").
  std::string noun = {};
  // Section: the keys it accepts. Table and List: the one spec of every value (named as a placeholder, "<node>").
  // Tagged: one Section per kind, named by the kind.
  OptionSpecs fields = {};
};

}  // namespace exogym::sdk
