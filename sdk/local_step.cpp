#include "exogym/sdk/local_step.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "exogym/sdk/compose.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/optim_state.h"
#include "exogym/sdk/stacked.h"

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

std::vector<at::Tensor> trainable_parameters(Model& model) {
  std::vector<at::Tensor> params;
  for (auto& p : model.network().parameters(/*recurse=*/true)) {
    if (p.requires_grad()) params.push_back(p);
  }
  return params;
}

LocalStep::LocalStep(LocalStepOptions options) : options_(std::move(options)) {}
LocalStep::~LocalStep() = default;
LocalStep::LocalStep(LocalStep&&) noexcept = default;
LocalStep& LocalStep::operator=(LocalStep&&) noexcept = default;

void LocalStep::init(NodeContext& ctx, Model& model) {
  ctx_ = &ctx;
  params_ = trainable_parameters(model);
  optimizer_ = options_.optimizer.build(params_, &model);
  lr_ = options_.lr_at(0, ctx.max_steps);
}

void LocalStep::zero_grad() { optimizer_->zero_grad(); }

void LocalStep::step() {
  // A stacked node's step may be taken with its stack's (step_together).
  if (!ctx_->stack || !ctx_->stack->take(*this)) {
    if (options_.max_norm > 0) ctx_->record("grad_norm", clip_grad_norm(params_, options_.max_norm));
    lr_ = options_.lr_at(ctx_->step, ctx_->max_steps);
    set_lr(*optimizer_, lr_);
    optimizer_->step();
  }
  for (auto& p : params_) {
    if (p.grad().defined()) p.mutable_grad().reset();
  }
}

void LocalStep::save_state(StateDict& out, const std::string& prefix) const {
  save_optimizer_state(*optimizer_, params_, out, prefix);
}

void LocalStep::load_state(const StateDict& in, const std::string& prefix) {
  optimizer_->state().clear();
  load_optimizer_state(*optimizer_, params_, in, prefix);
}

void LocalStep::reset() { optimizer_->state().clear(); }

}  // namespace exogym::sdk
