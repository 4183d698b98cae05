// Strategy "allreduce": data-parallel training (DDP). Every step, every node's
// gradients are averaged across the nodes, then clipped, then each node takes
// the same optimizer step, so all replicas stay identical.
#include <ATen/ATen.h>

#include <vector>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/compose.h"
#include "exogym/sdk/local_step.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
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
    local_.init(ctx, model);
  }

  void zero_grad() override { local_.zero_grad(); }

  void step() override {
    // Every node must hand the same tensors to the collective, so a parameter
    // that got no gradient on this node contributes zeros.
    std::vector<at::Tensor> grads;
    grads.reserve(local_.parameters().size());
    for (at::Tensor p : local_.parameters()) {  // a handle: its gradient is the parameter's
      if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
      grads.push_back(p.grad());
    }
    ctx_->communicator().all_reduce(grads, sdk::ReduceOp::Avg);
    // Clips the averaged gradient and steps: under stacked execution one
    // step over the stack's nodes (sdk::LocalStep::step).
    local_.step();
  }

  double lr() const override { return local_.lr(); }

  // The optimizer's moments; the LR schedule follows from ctx.step.
  void save_state(sdk::StateDict& out) const override { local_.save_state(out, "optimizer."); }
  void load_state(const sdk::StateDict& in) override { local_.load_state(in, "optimizer."); }

 private:
  sdk::LocalStep local_;
  sdk::NodeContext* ctx_ = nullptr;
};

}  // namespace exogym::plugins

EXOGYM_STRATEGY_PLUGIN("allreduce", "1.0.0", exogym::plugins::AllReduceStrategy, exogym::plugins::allreduce_options)
