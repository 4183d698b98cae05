#include "exogym/sdk/compose.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <map>
#include <string>

#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/optim_state.h"

namespace exogym::sdk {

ModuleSpecs LocalStepOptions::specs() {
  return {"LocalStepOptions",
          {
              OptionSpec{"optimizer", OptionType::Optimizer, "adamw", "the local (inner) optimizer"},
              OptionSpec{"lr_schedule", OptionType::LrSchedule, "constant",
                         "learning-rate schedule of the local optimizer (constant, cosine, linear)"},
              OptionSpec{"max_norm", OptionType::PositiveNumber, nullptr,
                         "clip each node's local gradient to this global L2 norm before its step (null: off)"},
          }};
}

LocalStepOptions LocalStepOptions::from_json(const nlohmann::json& validated_options) {
  const ModuleOptions o(validated_options, specs());
  LocalStepOptions local;
  local.optimizer = OptimizerSpec::from_json(o.at("optimizer"), "optimizer");
  local.schedule = LrSchedule::from_json(o.at("lr_schedule"), "lr_schedule");
  local.max_norm = o.at("max_norm").is_null() ? 0.0 : o.at("max_norm").get<double>();
  return local;
}

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

std::vector<at::Tensor> trainable_parameters(Model& model) {
  std::vector<at::Tensor> params;
  for (auto& p : model.network().parameters(/*recurse=*/true)) {
    if (p.requires_grad()) params.push_back(p);
  }
  return params;
}

CommunicateOptimizeStrategy::CommunicateOptimizeStrategy(LocalStepOptions local,
                                                         std::vector<std::unique_ptr<CommunicationModule>> modules)
    : local_(std::move(local)), modules_(std::move(modules)) {}

CommunicateOptimizeStrategy::~CommunicateOptimizeStrategy() = default;

void CommunicateOptimizeStrategy::init(NodeContext& ctx, Model& model) {
  ctx_ = &ctx;
  model_ = &model;
  params_ = trainable_parameters(model);
  optimizer_ = local_.optimizer.build(params_);
  lr_ = local_.lr_at(0, ctx.max_steps);
  for (auto& m : modules_) m->init(ctx, model);
}

void CommunicateOptimizeStrategy::zero_grad() { optimizer_->zero_grad(); }

void CommunicateOptimizeStrategy::step() {
  if (local_.max_norm > 0) ctx_->record("grad_norm", clip_grad_norm(params_, local_.max_norm));
  lr_ = local_.lr_at(ctx_->step, ctx_->max_steps);
  set_lr(*optimizer_, lr_);
  optimizer_->step();
  // The gradients are spent: released before the modules communicate, so
  // that nodes waiting in a collective hold none (Strategy::step).
  for (auto& p : params_) {
    if (p.grad().defined()) p.mutable_grad().reset();
  }
  for (auto& m : modules_) m->communicate(*ctx_, *model_, ctx_->step);
}

void CommunicateOptimizeStrategy::save_state(StateDict& out) const {
  save_optimizer_state(*optimizer_, params_, out, "local.");
  for (size_t i = 0; i < modules_.size(); ++i) modules_[i]->save_state(out, "module" + std::to_string(i) + ".");
}

void CommunicateOptimizeStrategy::load_state(const StateDict& in) {
  load_optimizer_state(*optimizer_, params_, in, "local.");
  for (size_t i = 0; i < modules_.size(); ++i) modules_[i]->load_state(in, "module" + std::to_string(i) + ".");
}

bool CommunicateOptimizeStrategy::recovers_model() const {
  for (const auto& m : modules_) {
    if (!m->recovers_model()) return false;
  }
  return true;
}

void CommunicateOptimizeStrategy::recovery_state(Model& model, StateDict& out) const {
  const bool whole = recovers_model();
  save_model_tensors(model, out, /*parameters=*/whole);
  if (whole) save_optimizer_state(*optimizer_, params_, out, "local.");
  for (size_t i = 0; i < modules_.size(); ++i) modules_[i]->recovery_state(out, "module" + std::to_string(i) + ".");
}

void CommunicateOptimizeStrategy::load_recovery_state(Model& model, const StateDict& in) {
  const bool whole = recovers_model();
  load_model_tensors(model, in, /*parameters=*/whole);
  // The restarted node's own optimizer state is gone: either the donor's, or
  // none (a fresh optimizer, as at step 0).
  optimizer_->state().clear();
  if (whole) load_optimizer_state(*optimizer_, params_, in, "local.");
  for (size_t i = 0; i < modules_.size(); ++i)
    modules_[i]->load_recovery_state(model, in, "module" + std::to_string(i) + ".");
}

}  // namespace exogym::sdk
