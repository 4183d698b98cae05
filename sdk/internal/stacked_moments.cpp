// The optimizer kinds whose state stacks (stacked_moments.h).
#include "exogym/sdk/internal/stacked_moments.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "exogym/sdk/internal/muon.h"

namespace exogym::sdk::internal {

namespace {

using torch::optim::OptimizerParamState;

template <class State>
Moments adam_moments() {
  Moments m;
  m.tensors = [](OptimizerParamState& s) {
    auto& a = static_cast<State&>(s);
    return std::vector<at::Tensor*>{&a.exp_avg(), &a.exp_avg_sq(), &a.max_exp_avg_sq()};
  };
  m.step = [](const OptimizerParamState& s) { return static_cast<int64_t>(static_cast<const State&>(s).step()); };
  m.set_step = [](OptimizerParamState& s, int64_t step) { static_cast<State&>(s).step(step); };
  m.make = [](const OptimizerParamState&) { return std::make_unique<State>(); };
  return m;
}

Moments sgd_moments() {
  Moments m;
  m.tensors = [](OptimizerParamState& s) {
    return std::vector<at::Tensor*>{&static_cast<torch::optim::SGDParamState&>(s).momentum_buffer()};
  };
  m.step = [](const OptimizerParamState&) { return int64_t{0}; };
  m.set_step = [](OptimizerParamState&, int64_t) {};
  m.make = [](const OptimizerParamState&) { return std::make_unique<torch::optim::SGDParamState>(); };
  return m;
}

// Muon's: a momentum buffer for a matrix it orthogonalises, AdamW's state
// for the rest.
Moments muon_moments() {
  const Moments adamw = adam_moments<torch::optim::AdamWParamState>();
  const auto matrix = [](const OptimizerParamState& s) { return dynamic_cast<const MuonParamState*>(&s) != nullptr; };
  Moments m;
  m.tensors = [adamw, matrix](OptimizerParamState& s) {
    return matrix(s) ? std::vector<at::Tensor*>{&static_cast<MuonParamState&>(s).momentum_buffer} : adamw.tensors(s);
  };
  m.step = [adamw, matrix](const OptimizerParamState& s) { return matrix(s) ? int64_t{0} : adamw.step(s); };
  m.set_step = [adamw, matrix](OptimizerParamState& s, int64_t step) {
    if (!matrix(s)) adamw.set_step(s, step);
  };
  m.make = [matrix](const OptimizerParamState& like) -> std::unique_ptr<OptimizerParamState> {
    if (matrix(like)) return std::make_unique<MuonParamState>();
    return std::make_unique<torch::optim::AdamWParamState>();
  };
  // The node's options; the matrices on AdamW's step (the model's
  // embeddings and head) are those the node's Muon does not orthogonalise,
  // since the stacks have no names to match.
  m.stacked_optimizer = [](const std::vector<at::Tensor>& stacks, const torch::optim::Optimizer& node,
                           const std::vector<at::Tensor>& rows0) -> std::unique_ptr<torch::optim::Optimizer> {
    const auto& muon = dynamic_cast<const Muon&>(node);
    std::vector<at::Tensor> to_adamw;
    for (size_t a = 0; a < stacks.size(); ++a)
      if (stacks[a].dim() >= 3 && !muon.orthogonalises(rows0[a])) to_adamw.push_back(stacks[a]);
    const auto& options = static_cast<const MuonOptions&>(muon.param_groups().front().options());
    return std::make_unique<Muon>(stacks, options, to_adamw, /*stacked=*/true);
  };
  return m;
}

}  // namespace

const Moments* stackable_moments(const std::string& name) {
  static const Moments adamw = adam_moments<torch::optim::AdamWParamState>(),
                       adam = adam_moments<torch::optim::AdamParamState>(), sgd = sgd_moments(), muon = muon_moments();
  if (name == "adamw") return &adamw;
  if (name == "adam") return &adam;
  if (name == "sgd") return &sgd;
  if (name == "muon") return &muon;
  return nullptr;
}

}  // namespace exogym::sdk::internal
