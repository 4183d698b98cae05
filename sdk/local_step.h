#pragma once
// A node's local step: its optimizer over the trainable parameters, LR schedule and clipping, where a plain loop calls
// optimizer.step(); composed strategies (compose.h) take it before their modules.
#include "exogym/sdk/optim.h"  // with at::Tensor, nlohmann::json, torch::optim::Optimizer
#include "exogym/sdk/state_dict.h"

namespace exogym::sdk {

class Model;
struct NodeContext;
struct ModuleSpecs;  // compose.h

struct LocalStepOptions {
  OptimizerSpec optimizer;
  LrSchedule schedule;
  double max_norm = 0;  // 0: no clipping

  // Options "optimizer" (default AdamW), "lr_schedule" and "max_norm", as a part of a strategy's.
  static ModuleSpecs specs();
  static LocalStepOptions from_json(const nlohmann::json& validated_options);
  // The LR of 0-based step `step` of `run_max_steps` (the schedule's default max_steps).
  double lr_at(int64_t step, int64_t run_max_steps) const {
    return optimizer.lr() * schedule.factor(step, run_max_steps);
  }
};

class LocalStep {
 public:
  explicit LocalStep(LocalStepOptions options);
  ~LocalStep();
  LocalStep(LocalStep&&) noexcept;
  LocalStep& operator=(LocalStep&&) noexcept;

  void init(NodeContext& ctx, Model& model);  // from the strategy's init(): builds the optimizer
  void zero_grad();
  // Clips the gradients (recording "grad_norm"), sets the scheduled LR, steps the optimizer and releases the gradients,
  // so that a node waiting in a collective afterwards holds none.
  void step();
  // Stacked execution (stacked.h): step() of every node of one stack at once, returning ""; or why their options,
  // optimizers or tensors do not allow it, nothing done.
  static std::string step_together(const std::vector<LocalStep*>& steps);
  double lr() const { return lr_; }  // the last step's (before the first step: step 0's)
  const std::vector<at::Tensor>& parameters() const { return params_; }  // trainable_parameters(model)
  torch::optim::Optimizer& optimizer() { return *optimizer_; }

  // The optimizer's state under `prefix` (optim_state.h); reset() forgets it, as a node that comes back without the
  // donor's has a fresh optimizer.
  void save_state(StateDict& out, const std::string& prefix) const;
  void load_state(const StateDict& in, const std::string& prefix);
  void reset();

 private:
  LocalStepOptions options_;
  NodeContext* ctx_ = nullptr;
  std::vector<at::Tensor> params_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  double lr_ = 0;
};

// Every trainable parameter, in the model's registration order (the same on every node); with their names:
// named_trainable_parameters (model.h).
std::vector<at::Tensor> trainable_parameters(Model& model);

}  // namespace exogym::sdk
