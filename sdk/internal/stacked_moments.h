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
  // The optimizer over `stacks` (each a stack whose row 0 is `rows0`'s
  // tensor of the same index) that steps every row as `node`, the first
  // node's optimizer, steps its parameter; null: the spec's own build
  // over the stacks does (the elementwise kinds).
  std::function<std::unique_ptr<torch::optim::Optimizer>(
      const std::vector<at::Tensor>& stacks, const torch::optim::Optimizer& node, const std::vector<at::Tensor>& rows0)>
      stacked_optimizer;
};

// The moments of the optimizer `name` (OptimizerSpec::name) if its step
// over a stack is each row's: AdamW, Adam, SGD and Muon; null otherwise.
const Moments* stackable_moments(const std::string& name);

}  // namespace exogym::sdk::internal
