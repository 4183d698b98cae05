#include "exogym/sdk/compose.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <map>
#include <string>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/stacked.h"

namespace exogym::sdk {

OptionSpecs compose_specs(const std::vector<ModuleSpecs>& parts) {
  OptionSpecs all;
  std::map<std::string, const std::string*> declared_by;  // option -> the part that declared it first
  for (const ModuleSpecs& part : parts) {
    for (const OptionSpec& spec : part.specs) {
      auto [it, first] = declared_by.emplace(spec.name, &part.module);
      if (!first) {
        throw PluginError("option \"" + spec.name + "\" is declared " +
                          (*it->second == part.module ? "twice by " + part.module
                                                      : "by both " + *it->second + " and " + part.module));
      }
      all.push_back(spec);
    }
  }
  return all;
}

ModuleOptions::ModuleOptions(const nlohmann::json& validated_options, const ModuleSpecs& declared)
    : module_(declared.module), options_(nlohmann::json::object()) {
  for (const OptionSpec& spec : declared.specs) {
    EXOGYM_CHECK_INTERNAL(validated_options.is_object() && validated_options.contains(spec.name),
                          module_ + "'s option \"" + spec.name +
                              "\" is not in the options it is given (validate them against its specs first)");
    options_[spec.name] = validated_options.at(spec.name);
  }
}

const nlohmann::json& ModuleOptions::at(const std::string& name) const {
  auto it = options_.find(name);
  EXOGYM_CHECK_INTERNAL(it != options_.end(), module_ + " reads the option \"" + name +
                                                  "\", which its specs() do not declare (a module reads only "
                                                  "the options it declares)");
  return *it;
}

namespace {
// A module's keys in its strategy's state: after its position's prefix.
std::string module_prefix(size_t i) { return "module" + std::to_string(i) + "."; }
}  // namespace

namespace detail {

namespace {
const std::string kLocalPrefix = "local.";
}  // namespace

Composition::Composition(LocalStepOptions local, std::vector<std::unique_ptr<CommunicationModule>> modules)
    : local_(std::move(local)), modules_(std::move(modules)) {}

Composition::~Composition() = default;

void Composition::init(NodeContext& ctx, Model& model) {
  ctx_ = &ctx;
  model_ = &model;
  local_.init(ctx, model);
  for (auto& m : modules_) m->init(ctx, model);
}

void Composition::zero_grad() {
  local_.zero_grad();
  // step() takes the local step before anything else: a stack may take it
  // right after the backward (stacked.h).
  if (ctx_->stack) ctx_->stack->take_after_backward(local_);
}

void Composition::step() {
  // The gradients are released by the local step, before the modules
  // communicate, so that nodes waiting in a collective hold none.
  local_.step();
  for (auto& m : modules_) m->communicate(*ctx_, *model_, ctx_->step);
}

void Composition::save_state(StateDict& out) const {
  local_.save_state(out, kLocalPrefix);
  for (size_t i = 0; i < modules_.size(); ++i) modules_[i]->save_state(out, module_prefix(i));
}

void Composition::load_state(const StateDict& in) {
  local_.load_state(in, kLocalPrefix);
  for (size_t i = 0; i < modules_.size(); ++i) modules_[i]->load_state(in, module_prefix(i));
}

bool Composition::recovers_model() const {
  for (const auto& m : modules_) {
    if (!m->recovers_model()) return false;
  }
  return true;
}

void Composition::recovery_state(Model& model, StateDict& out) const {
  const bool whole = recovers_model();
  save_model_tensors(model, out, /*parameters=*/whole);
  if (whole) local_.save_state(out, kLocalPrefix);
  for (size_t i = 0; i < modules_.size(); ++i) modules_[i]->recovery_state(out, module_prefix(i));
}

void Composition::load_recovery_state(Model& model, const StateDict& in) {
  const bool whole = recovers_model();
  load_model_tensors(model, in, /*parameters=*/whole);
  // The restarted node's own optimizer state is gone: either the donor's, or
  // none (a fresh optimizer, as at step 0).
  if (whole) {
    local_.load_state(in, kLocalPrefix);
  } else {
    local_.reset();
  }
  for (size_t i = 0; i < modules_.size(); ++i) modules_[i]->load_recovery_state(model, in, module_prefix(i));
}

bool Composition::has_client_state() const {
  for (const auto& m : modules_) {
    if (m->has_client_state()) return true;
  }
  return false;
}

void Composition::save_client_state(StateDict& out) const {
  for (size_t i = 0; i < modules_.size(); ++i) modules_[i]->save_client_state(out, module_prefix(i));
}

void Composition::load_client_state(const StateDict& in) {
  for (size_t i = 0; i < modules_.size(); ++i) modules_[i]->load_client_state(in, module_prefix(i));
}

}  // namespace detail

}  // namespace exogym::sdk
