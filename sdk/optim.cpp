#include "exogym/sdk/optim.h"

#include <ATen/core/grad_mode.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "exogym/sdk/error.h"
#include "exogym/sdk/internal/fused_adamw.h"
#include "exogym/sdk/internal/muon.h"
#include "exogym/sdk/internal/yogi.h"
#include "exogym/sdk/option_validation.h"

namespace exogym::sdk {

using nlohmann::json;

namespace {

enum class ParamKind { Positive, NonNegative, Boolean, Betas, PositiveInteger, NamePatterns };

struct ParamDef {
  const char* name;
  ParamKind kind;
  json default_value;
  // PositiveInteger: the largest accepted.
  int64_t maximum = std::numeric_limits<int>::max();
};

struct OptimizerDef {
  const char* name;
  std::vector<ParamDef> params;
};

// PyTorch's defaults (torch.optim 2.x), written out: LibTorch's differ (SGD has no default lr).
const std::vector<OptimizerDef>& optimizer_defs() {
  static const std::vector<OptimizerDef> defs = {
      {"adam",
       {{"lr", ParamKind::Positive, 1e-3},
        {"betas", ParamKind::Betas, {0.9, 0.999}},
        {"eps", ParamKind::NonNegative, 1e-8},
        {"weight_decay", ParamKind::NonNegative, 0.0},
        {"amsgrad", ParamKind::Boolean, false}}},
      {"adamw",
       {{"lr", ParamKind::Positive, 1e-3},
        {"betas", ParamKind::Betas, {0.9, 0.999}},
        {"eps", ParamKind::NonNegative, 1e-8},
        {"weight_decay", ParamKind::NonNegative, 0.01},
        {"amsgrad", ParamKind::Boolean, false}}},
      {"sgd",
       {{"lr", ParamKind::Positive, 1e-3},
        {"momentum", ParamKind::NonNegative, 0.0},
        {"dampening", ParamKind::NonNegative, 0.0},
        {"weight_decay", ParamKind::NonNegative, 0.0},
        {"nesterov", ParamKind::Boolean, false}}},
      {"rmsprop",
       {{"lr", ParamKind::Positive, 1e-2},
        {"alpha", ParamKind::NonNegative, 0.99},
        {"eps", ParamKind::NonNegative, 1e-8},
        {"weight_decay", ParamKind::NonNegative, 0.0},
        {"momentum", ParamKind::NonNegative, 0.0},
        {"centered", ParamKind::Boolean, false}}},
      {"adagrad",
       {{"lr", ParamKind::Positive, 1e-2},
        {"lr_decay", ParamKind::NonNegative, 0.0},
        {"weight_decay", ParamKind::NonNegative, 0.0},
        {"initial_accumulator_value", ParamKind::NonNegative, 0.0},
        {"eps", ParamKind::NonNegative, 1e-10}}},
      // Not PyTorch's: Yogi (internal/yogi.h), with TensorFlow Addons' defaults.
      {"yogi",
       {{"lr", ParamKind::Positive, 1e-2},
        {"betas", ParamKind::Betas, {0.9, 0.999}},
        {"eps", ParamKind::Positive, 1e-3},
        {"initial_accumulator_value", ParamKind::NonNegative, 1e-6},
        {"weight_decay", ParamKind::NonNegative, 0.0},
        {"bias_correction", ParamKind::Boolean, true}}},
      // Not PyTorch's: Keller Jordan's reference Muon for matrices, with the
      // AdamW the reference pairs it with for the rest (internal/muon.h).
      {"muon",
       {{"lr", ParamKind::Positive, 0.02},
        {"momentum", ParamKind::NonNegative, 0.95},
        {"nesterov", ParamKind::Boolean, true},
        // Each iteration is three matrix products per matrix per step: 5
        // converge, 100 is far past any use, and 1e9 would be a step that
        // never ends (not even on SIGTERM, which is seen between steps).
        {"ns_steps", ParamKind::PositiveInteger, 5, 100},
        {"weight_decay", ParamKind::NonNegative, 0.0},
        {"adamw_lr", ParamKind::Positive, 3e-4},
        {"adamw_betas", ParamKind::Betas, {0.9, 0.95}},
        {"adamw_eps", ParamKind::NonNegative, 1e-8},
        {"adamw_weight_decay", ParamKind::NonNegative, 0.0},
        // null: the embeddings and head the model declares (model.h), as the reference.
        {"adamw_params", ParamKind::NamePatterns, nullptr}}},
  };
  return defs;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

std::string did_you_mean(const std::string& given, const std::vector<std::string>& known) {
  std::string guess = closest_name(given, known);
  return guess.empty() ? "" : "; did you mean \"" + guess + "\"?";
}

const OptimizerDef& find_def(const json& name, const std::string& path) {
  if (!name.is_string()) throw ConfigError(path, "expected an optimizer name, got " + json_excerpt(name));
  const std::string key = lower(name.get<std::string>());
  std::vector<std::string> known;
  for (const auto& def : optimizer_defs()) {
    if (def.name == key) return def;
    known.push_back(def.name);
  }
  std::string hint = did_you_mean(key, known);
  throw ConfigError(path, "unknown optimizer " + json_excerpt(name) + (hint.empty() ? ";" : hint) +
                              " known optimizers: " + join(known));
}

// LibTorch converts a hyperparameter to the parameters' dtype when it
// steps; beyond a float's range (lr 1e308) that fails at the first step, in
// words that name no option.
bool fits_a_float(double value) { return std::abs(value) <= std::numeric_limits<float>::max(); }

json check_param(const ParamDef& def, const json& value, const std::string& path) {
  auto finite_number = [&](const json& v) { return v.is_number() && std::isfinite(v.get<double>()); };
  const std::string too_large = "beyond a float's range (about 3.4e38), which the parameters' type cannot hold, got ";
  switch (def.kind) {
    case ParamKind::Positive:
      if (!finite_number(value) || value.get<double>() <= 0)
        throw ConfigError(path, "expected a positive number, got " + json_excerpt(value));
      if (!fits_a_float(value.get<double>())) throw ConfigError(path, too_large + json_excerpt(value));
      return value.get<double>();
    case ParamKind::NonNegative:
      if (!finite_number(value) || value.get<double>() < 0)
        throw ConfigError(path, "expected a non-negative number, got " + json_excerpt(value));
      if (!fits_a_float(value.get<double>())) throw ConfigError(path, too_large + json_excerpt(value));
      return value.get<double>();
    case ParamKind::Boolean:
      if (!value.is_boolean()) throw ConfigError(path, "expected a boolean, got " + json_excerpt(value));
      return value;
    case ParamKind::Betas: {
      bool ok = value.is_array() && value.size() == 2;
      for (size_t i = 0; ok && i < 2; ++i)
        ok = finite_number(value[i]) && value[i].get<double>() >= 0 && value[i].get<double>() < 1;
      if (!ok) throw ConfigError(path, "expected two numbers in [0, 1), got " + json_excerpt(value));
      return json::array({value[0].get<double>(), value[1].get<double>()});
    }
    case ParamKind::PositiveInteger: {
      // 5.0 is 5, as the schedules' steps; within the parameter's maximum.
      const bool whole = finite_number(value) && std::floor(value.get<double>()) == value.get<double>();
      if (!whole || value.get<double>() < 1)
        throw ConfigError(path, "expected a positive integer, got " + json_excerpt(value));
      if (value.get<double>() > static_cast<double>(def.maximum))
        throw ConfigError(path, "expected a positive integer no larger than " + std::to_string(def.maximum) + ", got " +
                                    json_excerpt(value));
      return static_cast<int64_t>(value.get<double>());
    }
    case ParamKind::NamePatterns: {
      bool ok = value.is_null() || value.is_array();
      for (size_t i = 0; ok && value.is_array() && i < value.size(); ++i)
        ok = value[i].is_string() && !value[i].get<std::string>().empty();
      if (!ok)
        throw ConfigError(path,
                          "expected null or a list of name patterns (\"*\": any run), got " + json_excerpt(value));
      return value;
    }
  }
  return value;
}

OptimizerSpec defaults_of(const OptimizerDef& def) {
  OptimizerSpec spec;
  spec.name = def.name;
  spec.params = json::object();
  for (const auto& param : def.params) spec.params[param.name] = param.default_value;
  return spec;
}

}  // namespace

OptimizerSpec OptimizerSpec::from_json(const json& value, const std::string& path, const json& fallback) {
  if (value.is_null()) {
    if (!fallback.is_null()) return from_json(fallback, path, nullptr);
    return defaults_of(find_def("adamw", path));
  }
  if (value.is_string()) return defaults_of(find_def(value, path));
  if (!value.is_object()) throw ConfigError(path, "expected an optimizer name or object, got " + json_excerpt(value));

  // An object that names its optimizer is a complete spec: what it leaves
  // out takes PyTorch's defaults, as it would in Python, even when the
  // plugin's default is the same optimizer (DiLoCo's outer {"name": "sgd",
  // "momentum": 0} must not inherit its Nesterov). Only an object without a
  // name refines the plugin's default (DiLoCo's outer {"lr": 0.5}).
  OptimizerSpec spec;
  if (auto it = value.find("name"); it != value.end())
    spec = defaults_of(find_def(*it, path + ".name"));
  else if (!fallback.is_null())
    spec = from_json(fallback, path, nullptr);
  else
    spec = defaults_of(find_def("adamw", path));
  const OptimizerDef* def = &find_def(spec.name, path);
  std::vector<std::string> known;
  for (const auto& param : def->params) known.push_back(param.name);
  for (const auto& item : value.items()) {
    if (item.key() == "name") continue;
    auto param =
        std::find_if(def->params.begin(), def->params.end(), [&](const ParamDef& p) { return item.key() == p.name; });
    const std::string key_path = path + "." + item.key();
    if (param == def->params.end()) {
      std::string hint = did_you_mean(item.key(), known);
      throw ConfigError(key_path, "unknown hyper-parameter of " + spec.name + (hint.empty() ? ";" : hint) +
                                      " known hyper-parameters: " + join(known));
    }
    spec.params[item.key()] = check_param(*param, item.value(), key_path);
  }

  // PyTorch's SGD refuses this combination at construction; say so up front.
  if (spec.name == "sgd" && spec.params["nesterov"].get<bool>()) {
    double momentum = spec.params["momentum"].get<double>();
    double dampening = spec.params["dampening"].get<double>();
    if (momentum <= 0 || dampening != 0)
      throw ConfigError(path + ".nesterov", "nesterov requires momentum > 0 and dampening = 0, got momentum " +
                                                json_excerpt(momentum) + " and dampening " + json_excerpt(dampening));
  }
  return spec;
}

json describe_optimizers() {
  // In ParamKind's order.
  static const char* const kTypes[] = {"positive number",       "non-negative number", "boolean",
                                       "two numbers in [0, 1)", "positive integer",    "name patterns"};
  json out = json::object();
  for (const auto& def : optimizer_defs()) {
    json params = json::array();
    for (const auto& param : def.params) {
      params.push_back(
          {{"name", param.name}, {"type", kTypes[static_cast<int>(param.kind)]}, {"default", param.default_value}});
      if (param.kind == ParamKind::PositiveInteger) params.back()["maximum"] = param.maximum;
    }
    out[def.name] = std::move(params);
  }
  return out;
}

json OptimizerSpec::to_json() const {
  json out = params.is_object() ? params : json::object();
  out["name"] = name;
  return out;
}

double OptimizerSpec::lr() const { return params.at("lr").get<double>(); }

std::unique_ptr<torch::optim::Optimizer> OptimizerSpec::build(const std::vector<at::Tensor>& tensors,
                                                              Model* model) const {
  // Re-resolve so that a hand-built spec with missing keys still gets every
  // hyper-parameter set explicitly.
  const json p = from_json(to_json(), "optimizer").params;
  auto number = [&](const char* key) { return p.at(key).get<double>(); };
  auto flag = [&](const char* key) { return p.at(key).get<bool>(); };
  auto betas = [&] { return std::make_tuple(p.at("betas")[0].get<double>(), p.at("betas")[1].get<double>()); };
  const std::string key = lower(name);
  if (key == "adam") {
    return std::make_unique<torch::optim::Adam>(tensors, torch::optim::AdamOptions(number("lr"))
                                                             .betas(betas())
                                                             .eps(number("eps"))
                                                             .weight_decay(number("weight_decay"))
                                                             .amsgrad(flag("amsgrad")));
  }
  if (key == "adamw") {
    // LibTorch's AdamW, bit for bit, in one pass per parameter where it can.
    return std::make_unique<internal::FusedAdamW>(tensors, torch::optim::AdamWOptions(number("lr"))
                                                               .betas(betas())
                                                               .eps(number("eps"))
                                                               .weight_decay(number("weight_decay"))
                                                               .amsgrad(flag("amsgrad")));
  }
  if (key == "sgd") {
    return std::make_unique<torch::optim::SGD>(tensors, torch::optim::SGDOptions(number("lr"))
                                                            .momentum(number("momentum"))
                                                            .dampening(number("dampening"))
                                                            .weight_decay(number("weight_decay"))
                                                            .nesterov(flag("nesterov")));
  }
  if (key == "rmsprop") {
    return std::make_unique<torch::optim::RMSprop>(tensors, torch::optim::RMSpropOptions(number("lr"))
                                                                .alpha(number("alpha"))
                                                                .eps(number("eps"))
                                                                .weight_decay(number("weight_decay"))
                                                                .momentum(number("momentum"))
                                                                .centered(flag("centered")));
  }
  if (key == "adagrad") {
    return std::make_unique<torch::optim::Adagrad>(tensors,
                                                   torch::optim::AdagradOptions(number("lr"))
                                                       .lr_decay(number("lr_decay"))
                                                       .weight_decay(number("weight_decay"))
                                                       .initial_accumulator_value(number("initial_accumulator_value"))
                                                       .eps(number("eps")));
  }
  if (key == "muon") return internal::build_muon(p, tensors, model);
  if (key == "yogi") return internal::build_yogi(p, tensors);
  throw ConfigError("optimizer", "unknown optimizer \"" + name + "\"");  // unreachable: from_json checked it
}

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
  // Groups added later start from the defaults.
  optimizer.defaults().set_lr(lr);
}

double get_lr(const torch::optim::Optimizer& optimizer) {
  const auto& groups = optimizer.param_groups();
  if (!groups.empty() && groups.front().has_options()) return groups.front().options().get_lr();
  return optimizer.defaults().get_lr();
}

LrSchedule LrSchedule::from_json(const json& value, const std::string& path) {
  static const std::vector<std::string> kNames = {"constant", "cosine", "linear"};
  static const std::vector<std::string> kKeys = {"name", "warmup_steps", "min_factor", "max_steps"};
  auto parse_name = [&](const json& name, const std::string& name_path) {
    if (!name.is_string()) throw ConfigError(name_path, "expected a schedule name, got " + json_excerpt(name));
    std::string key = lower(name.get<std::string>());
    if (key == "lambda_cosine") key = "cosine";  // the reference's name
    if (std::find(kNames.begin(), kNames.end(), key) == kNames.end()) {
      std::string hint = did_you_mean(key, kNames);
      throw ConfigError(name_path, "unknown schedule " + json_excerpt(name) + (hint.empty() ? ";" : hint) +
                                       " known schedules: " + join(kNames));
    }
    return key;
  };
  auto default_min = [](const std::string& name) { return name == "cosine" ? 0.1 : name == "linear" ? 0.0 : 1.0; };
  auto steps = [&](const json& v, const std::string& key_path) {
    bool integral = v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                              std::floor(v.get<double>()) == v.get<double>());
    if (!integral || v.get<double>() < 0)
      throw ConfigError(key_path, "expected a non-negative integer, got " + json_excerpt(v));
    return static_cast<int64_t>(v.get<double>());
  };

  LrSchedule schedule;
  if (value.is_null()) return schedule;
  if (value.is_string()) {
    schedule.name = parse_name(value, path);
    schedule.min_factor = default_min(schedule.name);
    return schedule;
  }
  if (!value.is_object()) throw ConfigError(path, "expected a schedule name or object, got " + json_excerpt(value));
  for (const auto& item : value.items()) {
    if (std::find(kKeys.begin(), kKeys.end(), item.key()) != kKeys.end()) continue;
    std::string hint = did_you_mean(item.key(), kKeys);
    throw ConfigError(path + "." + item.key(), "unknown schedule setting" + (hint.empty() ? std::string(";") : hint) +
                                                   " known settings: " + join(kKeys));
  }
  if (value.contains("name")) schedule.name = parse_name(value["name"], path + ".name");
  schedule.min_factor = default_min(schedule.name);
  if (value.contains("warmup_steps")) schedule.warmup_steps = steps(value["warmup_steps"], path + ".warmup_steps");
  if (value.contains("max_steps")) schedule.max_steps = steps(value["max_steps"], path + ".max_steps");
  if (value.contains("min_factor")) {
    const json& v = value["min_factor"];
    // Ignored by "constant", but accepted so that switching the name does
    // not make a manifest invalid.
    if (!v.is_number() || !(v.get<double>() >= 0 && v.get<double>() <= 1))
      throw ConfigError(path + ".min_factor", "expected a number in [0, 1], got " + json_excerpt(v));
    schedule.min_factor = v.get<double>();
  }
  return schedule;
}

json LrSchedule::to_json() const {
  return {{"name", name}, {"warmup_steps", warmup_steps}, {"min_factor", min_factor}, {"max_steps", max_steps}};
}

double LrSchedule::factor(int64_t step, int64_t run_max_steps) const {
  const int64_t warmup = std::max<int64_t>(warmup_steps, 0);
  if (step < warmup) return double(step + 1) / double(warmup);
  if (name == "constant") return 1.0;
  const int64_t total = max_steps > 0 ? max_steps : run_max_steps;
  // Clamped: past max_steps the factor stays at min_factor.
  const double progress = std::clamp(double(step - warmup) / double(std::max<int64_t>(1, total - warmup)), 0.0, 1.0);
  if (name == "cosine") return min_factor + (1.0 - min_factor) * 0.5 * (1.0 + std::cos(M_PI * progress));
  if (name == "linear") return 1.0 - (1.0 - min_factor) * progress;
  return 1.0;
}

}  // namespace exogym::sdk
