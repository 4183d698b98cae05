#pragma once
// The optimizer kinds whose state stacks (LocalStep::step_together,
// sdk/stacked_step.cpp): how each one's per-parameter state is made, read
// and written, so that the nodes' moments become rows of stacks.
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace exogym::sdk::internal {

// The moments of one optimizer kind: how its per-parameter state is made,
// read and written.
struct Moments {
  // The state's tensors that are the parameter's shape (null: undefined).
  std::function<std::vector<at::Tensor*>(torch::optim::OptimizerParamState&)> tensors;
  // A state's step count (0 for kinds without one), and setting it.
  std::function<int64_t(const torch::optim::OptimizerParamState&)> step;
  std::function<void(torch::optim::OptimizerParamState&, int64_t)> set_step;
  // A fresh state of the kind `like` is (Muon keeps two kinds).
  std::function<std::unique_ptr<torch::optim::OptimizerParamState>(const torch::optim::OptimizerParamState& like)> make;
};

// The moments of the optimizer `name` (OptimizerSpec::name) if its step
// over a stack is each row's: AdamW, Adam, SGD and Muon; null otherwise.
const Moments* stackable_moments(const std::string& name);

}  // namespace exogym::sdk::internal
