#pragma once
// A node's local step (LocalStep below: optimizer, LR schedule, clipping) and its options.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exogym/sdk/optim.h"
#include "exogym/sdk/state_dict.h"

namespace torch::optim {
class Optimizer;
}

namespace exogym::sdk {

class Model;
struct NodeContext;
struct ModuleSpecs;  // compose.h

// The local step's settings (the options of every composed strategy).
struct LocalStepOptions {
  OptimizerSpec optimizer;
  LrSchedule schedule;
  double max_norm = 0;  // 0: no clipping

  // Options "optimizer" (default AdamW), "lr_schedule", "max_norm": a part of a strategy's (compose.h).
  static ModuleSpecs specs();
  static LocalStepOptions from_json(const nlohmann::json& validated_options);

  // The scheduled LR of 0-based step `step` of `run_max_steps` (the schedule's default max_steps).
  double lr_at(int64_t step, int64_t run_max_steps) const {
    return optimizer.lr() * schedule.factor(step, run_max_steps);
  }
};

// A node's local step, for any strategy to hold: its optimizer over the
// model's trainable parameters, the LR schedule and the clipping, called
// where a plain loop would call optimizer.step(). A composed strategy
// (compose.h) takes it before its modules; a strategy that changes the
// gradients first (FedProx's proximal term, SCAFFOLD's correction) or
// synchronises the optimizer's state (DES-LOC) holds one itself.
class LocalStep {
 public:
  explicit LocalStep(LocalStepOptions options);
  ~LocalStep();
  LocalStep(LocalStep&&) noexcept;
  LocalStep& operator=(LocalStep&&) noexcept;

  // From the strategy's init(): builds the optimizer.
  void init(NodeContext& ctx, Model& model);
  void zero_grad();
  // Clips the gradients (recording "grad_norm"), sets the scheduled LR,
  // steps the optimizer and releases the gradients, so that a node waiting
  // in a collective afterwards holds none (Strategy::step).
  void step();
  // Stacked execution (stacked.h): step() of every node of `steps`, one stack's in order, at once; "". Where
  // their options, optimizers or tensors do not allow it (stacked_step.cpp), why not, nothing done.
  static std::string step_together(const std::vector<LocalStep*>& steps);
  // The last step's learning rate (before the first step: step 0's).
  double lr() const { return lr_; }
  // The model's trainable parameters (trainable_parameters), which it steps.
  const std::vector<at::Tensor>& parameters() const { return params_; }
  torch::optim::Optimizer& optimizer() { return *optimizer_; }

  // The optimizer's state under `prefix` (optim_state.h). load_state replaces it; reset() forgets it
  // (a fresh optimizer's, as a node that comes back after a failure without the donor's has).
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

// The parameters a module synchronises: every trainable parameter, in the module's registration order
// (the same on every node). With their names: named_trainable_parameters (model.h), in the same order.
std::vector<at::Tensor> trainable_parameters(Model& model);

}  // namespace exogym::sdk
