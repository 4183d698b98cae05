#include "exogym/sdk/compose.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/optim_state.h"

namespace exogym::sdk {

OptionSpecs LocalStepOptions::specs() {
  return {
      OptionSpec{"optimizer", OptionType::Optimizer, "adamw", "the local (inner) optimizer"},
      OptionSpec{"lr_schedule", OptionType::LrSchedule, "constant",
                 "learning-rate schedule of the local optimizer (constant, cosine, linear)"},
      OptionSpec{"max_norm", OptionType::PositiveNumber, nullptr,
                 "clip each node's local gradient to this global L2 norm before its step (null: off)"},
  };
}

LocalStepOptions LocalStepOptions::from_json(const nlohmann::json& o) {
  LocalStepOptions local;
  local.optimizer = OptimizerSpec::from_json(o.at("optimizer"), "optimizer");
  local.schedule = LrSchedule::from_json(o.at("lr_schedule"), "lr_schedule");
  local.max_norm = o.at("max_norm").is_null() ? 0.0 : o.at("max_norm").get<double>();
  return local;
}

OptionSpecs concat_specs(OptionSpecs a, const OptionSpecs& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<at::Tensor> trainable_parameters(Model& model) {
  std::vector<at::Tensor> params;
  for (auto& p : model.module().parameters(/*recurse=*/true)) {
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
