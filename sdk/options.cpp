#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "exogym/sdk/error.h"
#include "exogym/sdk/optim.h"
#include "exogym/sdk/option_validation.h"

namespace exogym::sdk {

using nlohmann::json;

const char* to_string(OptionType type) {
  switch (type) {
    case OptionType::Integer:
      return "integer";
    case OptionType::PositiveInteger:
      return "positive integer";
    case OptionType::NonNegativeInteger:
      return "non-negative integer";
    case OptionType::Number:
      return "number";
    case OptionType::PositiveNumber:
      return "positive number";
    case OptionType::NonNegativeNumber:
      return "non-negative number";
    case OptionType::Fraction:
      return "fraction in (0, 1]";
    case OptionType::Boolean:
      return "boolean";
    case OptionType::String:
      return "string";
    case OptionType::NonEmptyString:
      return "non-empty string";
    case OptionType::Path:
      return "path";
    case OptionType::IntegerList:
      return "list of positive integers";
    case OptionType::List:
      return "list";
    case OptionType::ChoiceSet:
      return "list of choices, or a boolean";
    case OptionType::Optimizer:
      return "optimizer";
    case OptionType::LrSchedule:
      return "learning-rate schedule";
    case OptionType::Object:
    case OptionType::Section:
      return "object";
    case OptionType::Table:
      return "table";
    case OptionType::Tagged:
      return "name, or object with a \"name\"";
    case OptionType::Any:
      return "any value";
  }
  return "unknown type";
}

namespace {

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// Optimal-string-alignment distance: a swap of two adjacent letters counts
// as one edit, the most common typo ("nodse" for "nodes").
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// "a" for most types, "an" before a vowel: "expected an integer".
std::string with_article(const std::string& noun) {
  if (!noun.empty() && std::string("aeiou").find(noun[0]) != std::string::npos) return "an " + noun;
  return "a " + noun;
}

std::string joined_names(const std::vector<std::string>& names) {
  if (names.empty()) return "(none)";
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

[[noreturn]] void type_error(const std::string& path, const std::string& expected, const json& got) {
  throw ConfigError(path, "expected " + expected + ", got " + json_excerpt(got));
}

// The value as messages describe it: the declared noun, else the type's name.
std::string expected_value(const OptionSpec& spec) {
  return with_article(spec.noun.empty() ? to_string(spec.type) : spec.noun);
}

constexpr uint64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr double kFloatMax = std::numeric_limits<float>::max();

// JSON numbers that are integers, including 20.0 (some tools write every number as a
// float), as int64 or, above INT64_MAX, as uint64. Booleans are not numbers in nlohmann::json.
std::optional<json> as_integer(const json& value) {
  if (value.is_number_unsigned()) {
    const auto x = value.get<uint64_t>();
    return x > kInt64Max ? json(x) : json(static_cast<int64_t>(x));
  }
  if (value.is_number_integer()) return json(value.get<int64_t>());
  if (value.is_number_float()) {
    const double x = value.get<double>();
    if (std::isfinite(x) && std::floor(x) == x && std::fabs(x) < 9.0e18) return json(static_cast<int64_t>(x));
  }
  return std::nullopt;
}

int64_t minimum(OptionType type) {
  if (type == OptionType::PositiveInteger) return 1;
  if (type == OptionType::NonNegativeInteger) return 0;
  return std::numeric_limits<int64_t>::min();
}

// Whether an integer from as_integer is above `maximum` (a negative one never is).
bool exceeds(const json& integer, uint64_t maximum) {
  if (integer.is_number_unsigned()) return integer.get<uint64_t>() > maximum;
  const int64_t x = integer.get<int64_t>();
  return x > 0 && static_cast<uint64_t>(x) > maximum;
}

json check_integer(const OptionSpec& spec, const json& value, const std::string& path) {
  const auto number = as_integer(value);
  // Only values above INT64_MAX are unsigned, and those are above any minimum.
  if (!number || (!number->is_number_unsigned() && number->get<int64_t>() < minimum(spec.type)))
    type_error(path, expected_value(spec), value);
  if (exceeds(*number, spec.maximum))
    type_error(path, expected_value(spec) + " no larger than " + std::to_string(spec.maximum), value);
  return *number;
}

json check_number(const OptionSpec& spec, const json& value, const std::string& path) {
  if (!value.is_number()) type_error(path, expected_value(spec), value);
  const double x = value.get<double>();
  bool ok = std::isfinite(x);
  if (spec.type == OptionType::PositiveNumber) ok = ok && x > 0;
  if (spec.type == OptionType::NonNegativeNumber) ok = ok && x >= 0;
  if (spec.type == OptionType::Fraction) ok = ok && x > 0 && x <= 1;
  if (!ok) type_error(path, expected_value(spec), value);
  // LibTorch converts a hyperparameter to the parameters' type: beyond a float's range (a server_lr of
  // 1e300) it failed at the first step, naming no option. No option means such a number.
  if (std::fabs(x) > kFloatMax)
    throw ConfigError(path, "beyond a float's range (about 3.4e38), which the parameters' type cannot hold, got " +
                                json_excerpt(value));
  return value;  // integers stay integers: 1 and 1.0 read the same via get<double>()
}

json check_string(const OptionSpec& spec, const json& value, const std::string& path) {
  if (!value.is_string()) type_error(path, expected_value(spec), value);
  const auto& text = value.get_ref<const std::string&>();
  if (spec.type != OptionType::String && text.empty()) type_error(path, expected_value(spec), value);
  if (!spec.choices.empty() && std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end()) {
    std::string quoted;
    for (const auto& choice : spec.choices) quoted += (quoted.empty() ? "\"" : ", \"") + choice + "\"";
    std::string message = "expected one of " + quoted + ", got " + json_excerpt(value);
    std::string guess = closest_name(text, spec.choices);
    if (!guess.empty()) message += "; did you mean \"" + guess + "\"?";
    throw ConfigError(path, message);
  }
  return value;
}

json check_choice_set(const OptionSpec& spec, const json& value, const std::string& path) {
  if (value.is_boolean()) return value;
  std::string quoted;
  for (const auto& choice : spec.choices) quoted += (quoted.empty() ? "\"" : ", \"") + choice + "\"";
  const std::string expected = "true, false or a list of " + quoted;
  if (!value.is_array()) type_error(path, expected, value);
  const OptionSpec item{spec.name, OptionType::String, nullptr, spec.doc, spec.choices};
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    check_string(item, value[i], item_path);
    for (size_t j = 0; j < i; ++j)
      if (value[j] == value[i]) throw ConfigError(item_path, json_excerpt(value[i]) + " appears twice");
  }
  return value;
}

json check_value(const OptionSpec& spec, const json& value, const std::string& path, Unset unset);

json check_table(const OptionSpec& spec, const json& value, const std::string& path, Unset unset) {
  if (!value.is_object()) type_error(path, expected_value(spec), value);
  if (spec.fields.size() != 1) throw ConfigError(path, "declared as a table without the spec of its values (a bug)");
  json out = json::object();
  for (const auto& item : value.items())
    out[item.key()] = check_value(spec.fields[0], item.value(), path + "." + item.key(), unset);
  return out;
}

json check_list(const OptionSpec& spec, const json& value, const std::string& path, Unset unset) {
  if (!value.is_array()) type_error(path, expected_value(spec), value);
  if (spec.fields.size() != 1) throw ConfigError(path, "declared as a list without the spec of its items (a bug)");
  json out = json::array();
  for (size_t i = 0; i < value.size(); ++i)
    out.push_back(check_value(spec.fields[0], value[i], path + "[" + std::to_string(i) + "]", unset));
  return out;
}

// The kind a Tagged value names, checked like a String option's choices.
const OptionSpec& tagged_kind(const OptionSpec& spec, const json& name, const std::string& path) {
  OptionSpec names{spec.name, OptionType::NonEmptyString, nullptr, spec.doc};
  for (const auto& kind : spec.fields) names.choices.push_back(kind.name);
  check_string(names, name, path);
  for (const auto& kind : spec.fields)
    if (kind.name == name.get_ref<const std::string&>()) return kind;
  throw ConfigError(path, "declared as tagged without kinds (a bug)");
}

// A name alone stays a name, so that the resolved options read as written;
// an object is resolved like a Section of its kind, "name" first.
json check_tagged(const OptionSpec& spec, const json& value, const std::string& path, Unset unset) {
  if (value.is_string()) {
    const OptionSpec& kind = tagged_kind(spec, value, path);
    for (const auto& field : kind.fields) {
      if (!field.required) continue;
      throw ConfigError(path, "\"" + kind.name + "\" needs \"" + field.name + "\" (" + field.doc +
                                  "): write {\"name\": \"" + kind.name + "\", \"" + field.name + "\": ...}");
    }
    return value;
  }
  if (!value.is_object()) type_error(path, expected_value(spec), value);
  const auto name = value.find("name");
  if (name == value.end()) throw ConfigError(path + ".name", "required option missing (" + expected_value(spec) + ")");
  const OptionSpec& kind = tagged_kind(spec, *name, path + ".name");
  OptionSpecs fields = kind.fields;
  fields.insert(fields.begin(), OptionSpec{"name", OptionType::NonEmptyString, nullptr, "the kind"});
  return validate_options(value, fields, path, unset);
}

json check_value(const OptionSpec& spec, const json& value, const std::string& path, Unset unset) {
  switch (spec.type) {
    case OptionType::Integer:
    case OptionType::PositiveInteger:
    case OptionType::NonNegativeInteger:
      return check_integer(spec, value, path);
    case OptionType::Number:
    case OptionType::PositiveNumber:
    case OptionType::NonNegativeNumber:
    case OptionType::Fraction:
      return check_number(spec, value, path);
    case OptionType::Boolean:
      if (!value.is_boolean()) type_error(path, expected_value(spec), value);
      return value;
    case OptionType::String:
    case OptionType::NonEmptyString:
    case OptionType::Path:
      return check_string(spec, value, path);
    case OptionType::IntegerList: {
      if (!value.is_array()) type_error(path, expected_value(spec), value);
      const OptionSpec item{spec.name, OptionType::PositiveInteger, nullptr, spec.doc};
      json out = json::array();
      for (size_t i = 0; i < value.size(); ++i)
        out.push_back(check_integer(item, value[i], path + "[" + std::to_string(i) + "]"));
      return out;
    }
    case OptionType::ChoiceSet:
      return check_choice_set(spec, value, path);
    case OptionType::Optimizer:
      // The declared default is the fallback a partial object is merged over.
      return OptimizerSpec::from_json(value, path, spec.default_value).to_json();
    case OptionType::LrSchedule:
      return LrSchedule::from_json(value, path).to_json();
    case OptionType::Object:
      if (!value.is_object()) type_error(path, expected_value(spec), value);
      return value;
    case OptionType::Section:
      if (!value.is_object()) type_error(path, expected_value(spec), value);
      return validate_options(value, spec.fields, path, unset);
    case OptionType::Table:
      return check_table(spec, value, path, unset);
    case OptionType::List:
      return check_list(spec, value, path, unset);
    case OptionType::Tagged:
      return check_tagged(spec, value, path, unset);
    case OptionType::Any:
      return value;
  }
  return value;
}

// Unknown keys are reported before anything else, so that a misspelt key is
// reported as such instead of as "required" for the key it was meant to be.
void reject_unknown(const json& given, const OptionSpecs& specs, const std::string& prefix) {
  std::vector<std::string> known;
  for (const auto& spec : specs) known.push_back(spec.name);
  for (const auto& item : given.items()) {
    if (std::find(known.begin(), known.end(), item.key()) != known.end()) continue;
    std::string message = "unknown option";
    std::string guess = closest_name(item.key(), known);
    message += guess.empty() ? ";" : "; did you mean \"" + guess + "\"?";
    message += " known options: " + joined_names(known);
    throw ConfigError(prefix + item.key(), message);
  }
}

}  // namespace

std::string json_excerpt(const json& value) {
  constexpr size_t kMaxChars = 80;
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kMaxChars) text = text.substr(0, kMaxChars - 3) + "...";
  return text;
}

std::string closest_name(const std::string& given, const std::vector<std::string>& known) {
  const std::string key = lowercase(given);
  if (key.empty()) return "";
  for (const auto& name : known)
    if (lowercase(name) == key) return name;
  // A misspelling: at most 2 edits, and fewer edits than the word has
  // letters, so that "p" is not "corrected" to "H".
  std::string best;
  size_t best_distance = 3;
  for (const auto& name : known) {
    size_t distance = edit_distance(key, lowercase(name));
    if (distance < best_distance && distance < key.size()) {
      best = name;
      best_distance = distance;
    }
  }
  if (!best.empty()) return best;
  // An abbreviation ("p" for "p_sparta") or a name with extra letters.
  for (const auto& name : known) {
    std::string candidate = lowercase(name);
    if (candidate.rfind(key, 0) == 0 || key.rfind(candidate, 0) == 0) return name;
  }
  return "";
}

json validate_options(const json& given, const OptionSpecs& specs, const std::string& path, Unset unset) {
  if (!given.is_null() && !given.is_object()) type_error(path, "an object of options", given);
  const auto prefix = path.empty() ? std::string() : path + ".";
  if (given.is_object()) reject_unknown(given, specs, prefix);

  json resolved = json::object();
  for (const auto& spec : specs) {
    const std::string option_path = prefix + spec.name;
    // An explicit null reads as "omitted": the default applies.
    const json* value = nullptr;
    if (given.is_object()) {
      auto it = given.find(spec.name);
      if (it != given.end() && !it->is_null()) value = &*it;
    }
    if (value) {
      resolved[spec.name] = check_value(spec, *value, option_path, unset);
    } else if (spec.required) {
      throw ConfigError(option_path, "required option missing (" + expected_value(spec) +
                                         (spec.doc.empty() ? "" : ": " + spec.doc) + ")");
    } else if (spec.type == OptionType::LrSchedule) {
      // Written out even when unset (null reads as a constant schedule), so
      // config.json shows the schedule that ran.
      resolved[spec.name] = LrSchedule::from_json(spec.default_value, option_path).to_json();
    } else if (spec.default_value.is_null()) {
      if (unset == Unset::Null) resolved[spec.name] = nullptr;
    } else {
      // Defaults go through the same checks: an optimizer default is written
      // out in full, a section's defaults are filled in, and a plugin's
      // ill-typed default fails loudly here.
      OptionSpec without_fallback = spec;
      without_fallback.default_value = nullptr;
      resolved[spec.name] = check_value(without_fallback, spec.default_value, option_path, unset);
    }
  }
  return resolved;
}

json describe_options(const OptionSpecs& specs) {
  json out = json::array();
  for (const auto& spec : specs) {
    json entry = {
        {"name", spec.name}, {"type", to_string(spec.type)}, {"default", spec.default_value}, {"doc", spec.doc}};
    if (!spec.choices.empty()) entry["choices"] = spec.choices;
    if (spec.required) entry["required"] = true;
    if (spec.maximum != kInt64Max) entry["maximum"] = spec.maximum;
    if (!spec.noun.empty()) entry["noun"] = spec.noun;
    if (!spec.fields.empty()) entry["fields"] = describe_options(spec.fields);
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace exogym::sdk
