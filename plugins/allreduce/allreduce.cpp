// Strategy "allreduce": data-parallel training (DDP). Every step, every node's
// gradients are averaged across the nodes, then clipped, then each node takes
// the same optimizer step, so all replicas stay identical.
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/compose.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/optim.h"
#include "exogym/sdk/optim_state.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/strategy.h"

namespace exogym::plugins {

// The local step's options (sdk::LocalStepOptions); here the optimizer and
// the clipping act on the averaged gradient, which their docs say.
static sdk::OptionSpecs allreduce_options() {
  sdk::OptionSpecs specs = sdk::LocalStepOptions::specs().specs;
  for (auto& spec : specs) {
    if (spec.name == "optimizer") spec.doc = "the optimizer every node applies to the averaged gradient";
    if (spec.name == "max_norm") spec.doc = "clip the averaged gradient to this global L2 norm (null: no clipping)";
  }
  return specs;
}

class AllReduceStrategy final : public sdk::Strategy {
 public:
  explicit AllReduceStrategy(const nlohmann::json& options) : local_(sdk::LocalStepOptions::from_json(options)) {}

  void init(sdk::NodeContext& ctx, sdk::Model& model) override {
    ctx_ = &ctx;
    params_ = model.network().parameters();
    optimizer_ = local_.optimizer.build(params_);
    lr_ = local_.lr_at(0, ctx.max_steps);
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
    if (local_.max_norm > 0) ctx_->record("grad_norm", sdk::clip_grad_norm(params_, local_.max_norm));
    lr_ = local_.lr_at(ctx_->step, ctx_->max_steps);
    sdk::set_lr(*optimizer_, lr_);
    optimizer_->step();
  }

  double lr() const override { return lr_; }

  // The optimizer's moments; the LR schedule follows from ctx.step.
  void save_state(sdk::StateDict& out) const override {
    sdk::save_optimizer_state(*optimizer_, params_, out, "optimizer.");
  }
  void load_state(const sdk::StateDict& in) override {
    sdk::load_optimizer_state(*optimizer_, params_, in, "optimizer.");
  }

 private:
  sdk::LocalStepOptions local_;
  sdk::NodeContext* ctx_ = nullptr;
  std::vector<at::Tensor> params_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  double lr_ = 0;
};

}  // namespace exogym::plugins

EXOGYM_STRATEGY_PLUGIN("allreduce", "1.0.0", exogym::plugins::AllReduceStrategy, exogym::plugins::allreduce_options)
