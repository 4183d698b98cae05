// Strategy "allreduce": data-parallel training (DDP). Every step, every node's
// gradients are averaged across the nodes, then clipped, then each node takes
// the same optimizer step, so all replicas stay identical.
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/optim.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/strategy.h"

namespace exogym::plugins {

using sdk::OptionSpec;
using sdk::OptionType;

static sdk::OptionSpecs allreduce_options() {
  return {
      OptionSpec{"optimizer", OptionType::Optimizer, "adamw",
                 "the optimizer every node applies to the averaged gradient"},
      OptionSpec{"lr_schedule", OptionType::LrSchedule, "constant",
                 "learning-rate schedule (constant, cosine, linear)"},
      OptionSpec{"max_norm", OptionType::PositiveNumber, nullptr,
                 "clip the averaged gradient to this global L2 norm (null: no clipping)"},
  };
}

class AllReduceStrategy final : public sdk::Strategy {
 public:
  explicit AllReduceStrategy(const nlohmann::json& options)
      : optimizer_spec_(sdk::OptimizerSpec::from_json(options.at("optimizer"), "optimizer")),
        schedule_(sdk::LrSchedule::from_json(options.at("lr_schedule"), "lr_schedule")),
        max_norm_(options.at("max_norm").is_null() ? 0.0 : options.at("max_norm").get<double>()) {}

  void init(sdk::NodeContext& ctx, sdk::Model& model) override {
    ctx_ = &ctx;
    params_ = model.module().parameters();
    optimizer_ = optimizer_spec_.build(params_);
    lr_ = optimizer_spec_.lr() * schedule_.factor(0, ctx.max_steps);
  }

  void zero_grad() override { optimizer_->zero_grad(); }

  void step() override {
    // Every node must hand the same tensors to the collective, so a parameter
    // that got no gradient on this node contributes zeros.
    std::vector<at::Tensor> grads;
    grads.reserve(params_.size());
    for (auto& p : params_) {
      if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
      grads.push_back(p.grad());
    }
    ctx_->communicator().all_reduce(grads, sdk::ReduceOp::Avg);
    if (max_norm_ > 0) sdk::clip_grad_norm(params_, max_norm_);
    lr_ = optimizer_spec_.lr() * schedule_.factor(ctx_->step, ctx_->max_steps);
    sdk::set_lr(*optimizer_, lr_);
    optimizer_->step();
  }

  double lr() const override { return lr_; }

 private:
  sdk::OptimizerSpec optimizer_spec_;
  sdk::LrSchedule schedule_;
  double max_norm_;
  sdk::NodeContext* ctx_ = nullptr;
  std::vector<at::Tensor> params_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  double lr_ = 0;
};

}  // namespace exogym::plugins

EXOGYM_STRATEGY_PLUGIN("allreduce", "1.0.0", exogym::plugins::AllReduceStrategy, exogym::plugins::allreduce_options)
