#include "exogym/runtime/manifest/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <utility>

#include "exogym/runtime/manifest/schema.h"
#include "exogym/sdk/optim.h"
#include "exogym/sdk/option_validation.h"

namespace exogym::runtime::manifest {

namespace {

using nlohmann::json;
using sdk::OptionSpec;
using OptionType = sdk::OptionType;

constexpr uint64_t kNoMaximum = std::numeric_limits<int64_t>::max();
const char* const kOptimizerRef = "#/definitions/optimizer";
const char* const kScheduleRef = "#/definitions/lr_schedule";

// Optimizer and schedule names are matched case-insensitively ("AdamW").
std::string any_case_pattern(const std::vector<std::string>& names) {
  std::string pattern = "^(?:";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) pattern += '|';
    for (char c : names[i]) {
      const auto u = static_cast<unsigned char>(c);
      if (std::isalpha(u))
        pattern += std::string("[") + static_cast<char>(std::tolower(u)) + static_cast<char>(std::toupper(u)) + "]";
      else
        pattern += c;
    }
  }
  return pattern + ")$";
}

json name_schema(const std::vector<std::string>& names) {
  return {{"type", "string"}, {"pattern", any_case_pattern(names)}, {"examples", names}};
}

constexpr double kFloatMax = std::numeric_limits<float>::max();

json integer_schema(int64_t minimum, uint64_t maximum) {
  json s = {{"type", "integer"}};
  if (minimum > std::numeric_limits<int64_t>::min()) s["minimum"] = minimum;
  if (maximum != kNoMaximum) s["maximum"] = maximum;
  return s;
}

// A Tagged value: the name of a kind without required keys, or an object
// naming its kind, with that kind's keys. An object naming its kind is
// complete even in a variant (it replaces the base's, patch.h); there an
// object without "name" refines the base's kind with any kind's keys.
json tagged_schema(const OptionSpec& spec, bool partial) {
  json names = json::array();
  json alternatives = json::array();
  json any_keys = json::object();
  for (const auto& kind : spec.fields) {
    const bool needs_keys =
        std::any_of(kind.fields.begin(), kind.fields.end(), [](const OptionSpec& f) { return f.required; });
    if (!needs_keys) names.push_back(kind.name);
    json object = options_json_schema(kind.fields, false);
    object["properties"]["name"] = {{"const", kind.name}};
    object["required"].push_back("name");
    alternatives.push_back(std::move(object));
    const json refining = options_json_schema(kind.fields, true);
    for (const auto& [key, schema] : refining.at("properties").items()) {
      if (!any_keys.contains(key)) any_keys[key] = schema;
    }
  }
  if (!names.empty()) alternatives.insert(alternatives.begin(), json{{"enum", names}});
  if (partial) {
    alternatives.push_back({{"type", "object"},
                            {"not", {{"required", {"name"}}}},
                            {"properties", any_keys},
                            {"additionalProperties", false}});
  }
  return {{"anyOf", std::move(alternatives)}};
}

// What a value of `spec` may be, without null or annotations.
json value_schema(const OptionSpec& spec, bool partial) {
  switch (spec.type) {
    case OptionType::Integer:
      return integer_schema(std::numeric_limits<int64_t>::min(), spec.maximum);
    case OptionType::PositiveInteger:
      return integer_schema(1, spec.maximum);
    case OptionType::NonNegativeInteger:
      return integer_schema(0, spec.maximum);
    // Within a float's range, as sdk/options.cpp's check_number.
    case OptionType::Number:
      return {{"type", "number"}, {"minimum", -kFloatMax}, {"maximum", kFloatMax}};
    case OptionType::PositiveNumber:
      return {{"type", "number"}, {"exclusiveMinimum", 0}, {"maximum", kFloatMax}};
    case OptionType::NonNegativeNumber:
      return {{"type", "number"}, {"minimum", 0}, {"maximum", kFloatMax}};
    case OptionType::Fraction:
      return {{"type", "number"}, {"exclusiveMinimum", 0}, {"maximum", 1}};
    case OptionType::Boolean:
      return {{"type", "boolean"}};
    case OptionType::String:
    case OptionType::NonEmptyString:
    case OptionType::Path: {
      json s = {{"type", "string"}};
      if (spec.type != OptionType::String) s["minLength"] = 1;
      if (!spec.choices.empty()) s["enum"] = spec.choices;
      return s;
    }
    case OptionType::IntegerList:
      return {{"type", "array"}, {"items", integer_schema(1, kNoMaximum)}};
    case OptionType::ChoiceSet:
      return {{"anyOf",
               json::array({json{{"type", "boolean"}},
                            json{{"type", "array"}, {"items", {{"enum", spec.choices}}}, {"uniqueItems", true}}})}};
    case OptionType::Optimizer:
      return {{"$ref", kOptimizerRef}};
    case OptionType::LrSchedule:
      return {{"$ref", kScheduleRef}};
    case OptionType::Object:
      return {{"type", "object"}};
    case OptionType::Section:
      return options_json_schema(spec.fields, partial);
    case OptionType::Table:
      if (spec.fields.size() != 1) return {{"type", "object"}};
      return {{"type", "object"}, {"additionalProperties", option_json_schema(spec.fields[0], partial)}};
    case OptionType::List:
      if (spec.fields.size() != 1) return {{"type", "array"}};
      return {{"type", "array"}, {"items", option_json_schema(spec.fields[0], partial)}};
    case OptionType::Tagged:
      return tagged_schema(spec, partial);
    case OptionType::Any:
      return json::object();
  }
  return json::object();
}

// The reader takes an explicit null for "left out" (and a variant's null
// removes the key, as in a JSON merge patch).
json nullable(json s) {
  if (s.empty()) return s;
  if (s.contains("enum")) s["enum"].push_back(nullptr);
  if (s.contains("type") && s["type"].is_string()) {
    s["type"] = json::array({s["type"], "null"});
    return s;
  }
  if (s.contains("anyOf")) {
    s["anyOf"].push_back({{"type", "null"}});
    return s;
  }
  return {{"anyOf", json::array({std::move(s), {{"type", "null"}}})}};
}

json param_schema(const json& param) {
  const std::string type = param.at("type");
  json s;
  if (type == "positive number") s = {{"type", "number"}, {"exclusiveMinimum", 0}};
  if (type == "non-negative number") s = {{"type", "number"}, {"minimum", 0}};
  if (type == "boolean") s = {{"type", "boolean"}};
  if (type == "positive integer") s = integer_schema(1, param.at("maximum").get<uint64_t>());
  if (type == "two numbers in [0, 1)") {
    s = {{"type", "array"},
         {"items", {{"type", "number"}, {"minimum", 0}, {"exclusiveMaximum", 1}}},
         {"minItems", 2},
         {"maxItems", 2}};
  }
  if (type == "name patterns") {
    s = {{"anyOf",
          json::array({{{"type", "null"}}, {{"type", "array"}, {"items", {{"type", "string"}, {"minLength", 1}}}}})}};
  }
  s["default"] = param.at("default");
  // PyTorch's defaults but muon's, which are its reference implementation's.
  s["description"] = type + ", default " + param.at("default").dump();
  return s;
}

// "adamw", or an object: with "name", that optimizer's hyper-parameters
// (PyTorch's defaults for the others); without, any known hyper-parameter
// refining the option's default optimizer (sdk/optim.h).
json optimizer_schema() {
  const json optimizers = sdk::describe_optimizers();
  std::vector<std::string> names;
  json any_params = json::object();
  json by_name = json::array();
  for (const auto& [name, params] : optimizers.items()) {
    names.push_back(name);
    json properties = {{"name", name_schema({name})}};
    for (const auto& param : params) {
      const std::string key = param.at("name");
      properties[key] = param_schema(param);
      if (!any_params.contains(key)) any_params[key] = param_schema(param);
    }
    by_name.push_back({{"if", {{"properties", {{"name", {{"pattern", any_case_pattern({name})}}}}}}},
                       {"then", {{"properties", properties}, {"additionalProperties", false}}}});
  }
  const json named = {
      {"type", "object"}, {"required", {"name"}}, {"properties", {{"name", name_schema(names)}}}, {"allOf", by_name}};
  const json refining = {{"type", "object"},
                         {"not", {{"required", {"name"}}}},
                         {"properties", any_params},
                         {"additionalProperties", false}};
  return {{"description",
           "an optimizer name, or an object: with \"name\", that optimizer with PyTorch's defaults for what it "
           "leaves out; without, hyper-parameters refining the option's default optimizer"},
          {"anyOf", {name_schema(names), named, refining}}};
}

json schedule_schema() {
  const std::vector<std::string> names = {"constant", "cosine", "linear", "lambda_cosine"};
  const json steps = integer_schema(0, kNoMaximum);
  const json object = {{"type", "object"},
                       {"properties",
                        {{"name", name_schema(names)},
                         {"warmup_steps", steps},
                         {"min_factor", {{"type", "number"}, {"minimum", 0}, {"maximum", 1}}},
                         {"max_steps", steps}}},
                       {"additionalProperties", false}};
  return {{"description", "a learning-rate schedule: a name, or {name, warmup_steps, min_factor, max_steps}"},
          {"anyOf", {name_schema(names), object}}};
}

// In `section` (the schema of {"<key>": name, "options": {...}}), the
// options of each plugin of `kind` when `key` names it.
void add_plugin_options(json& section, const std::string& key, const std::string& kind,
                        const std::vector<PluginOptions>& plugins, bool partial) {
  std::vector<std::string> names;
  json cases = json::array();
  for (const auto& p : plugins) {
    if (p.kind != kind) continue;
    names.push_back(p.name);
    cases.push_back({{"if", {{"properties", {{key, {{"const", p.name}}}}}, {"required", {key}}}},
                     {"then", {{"properties", {{"options", options_json_schema(p.options, partial)}}}}}});
  }
  if (names.empty()) return;
  section["properties"][key]["examples"] = names;
  section["allOf"] = std::move(cases);
}

// The manifest's keys, or a variant's (`partial`).
json manifest_object(const std::vector<PluginOptions>& plugins, bool partial) {
  json s = options_json_schema(manifest_schema(), partial);
  json& properties = s["properties"];
  add_plugin_options(properties["model"], "plugin", "model", plugins, partial);
  add_plugin_options(properties["strategy"], "plugin", "strategy", plugins, partial);
  for (const char* split : {"train", "val"})
    add_plugin_options(properties["data"]["properties"][split], "dataset", "dataset", plugins, partial);
  if (partial) {
    properties.erase("runs");   // variants do not nest
    properties.erase("seeds");  // every variant runs once per seed of the base
  } else {
    json& runs = properties["runs"];  // declared as Any: expanded before validation
    runs["type"] = "array";
    runs["minItems"] = 1;
    runs["items"] = {{"$ref", "#/definitions/variant"}};
    // What the List type cannot say; the reader checks it too (seeds.h).
    properties["seeds"]["minItems"] = 1;
    properties["seeds"]["uniqueItems"] = true;
    properties["$schema"] = {{"type", "string"}, {"description", "this schema, for editors; exogym-run ignores it"}};
  }
  return s;
}

}  // namespace

json option_json_schema(const OptionSpec& spec, bool partial) {
  json s = value_schema(spec, partial);
  if (partial || !spec.required) s = nullable(std::move(s));
  // Draft 7 ignores the siblings of "$ref": keep the documentation beside it.
  if (s.contains("$ref")) s = {{"allOf", json::array({std::move(s)})}};
  std::string doc = spec.doc;
  if (!spec.noun.empty()) doc += (doc.empty() ? "" : " (") + spec.noun + (doc.empty() ? "" : ")");
  if (!doc.empty()) s["description"] = doc;
  if (!spec.default_value.is_null() && spec.type != OptionType::Section) s["default"] = spec.default_value;
  return s;
}

json options_json_schema(const sdk::OptionSpecs& specs, bool partial) {
  json properties = json::object();
  json required = json::array();
  for (const auto& spec : specs) {
    properties[spec.name] = option_json_schema(spec, partial);
    if (spec.required && !partial) required.push_back(spec.name);
  }
  json s = {{"type", "object"}, {"properties", std::move(properties)}, {"additionalProperties", false}};
  if (!required.empty()) s["required"] = std::move(required);
  return s;
}

json manifest_json_schema(const std::vector<PluginOptions>& plugins) {
  json s = {{"$schema", "http://json-schema.org/draft-07/schema#"},
            {"title", "ExoGym manifest"},
            {"description",
             "A manifest of exogym-run (docs/manifest.md), with the options of the plugins found when "
             "`exogym-run --schema` wrote this schema."}};
  s.update(manifest_object(plugins, false));
  s["definitions"] = {
      {"optimizer", optimizer_schema()},
      {"lr_schedule", schedule_schema()},
      {"variant", manifest_object(plugins, true)},
  };
  s["definitions"]["variant"]["description"] =
      "a variant: a partial manifest merged over the base (JSON merge patch; null removes a key, an object with a "
      "\"name\" replaces the one it patches)";
  return s;
}

}  // namespace exogym::runtime::manifest
