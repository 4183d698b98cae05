#include "exogym/modules/diloco.h"

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/sgd.h>

#include <sstream>
#include <string>
#include <type_traits>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/node.h"

namespace exogym::modules {

namespace {

// The optimizer's state key of a parameter: a string in LibTorch 1.x, the
// TensorImpl pointer in 2.x.
template <class Optimizer>
auto state_key(Optimizer& optimizer, const at::Tensor& param) {
  using Key = typename std::decay_t<decltype(optimizer.state())>::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream key;  // how LibTorch 1.x prints the pointer (c10::guts::to_string, gone in 2.x)
    key << param.unsafeGetTensorImpl();
    return key.str();
  } else {
    return static_cast<Key>(param.unsafeGetTensorImpl());
  }
}

}  // namespace

using sdk::OptionSpec;
using sdk::OptionType;

nlohmann::json DiLoCoModule::default_outer_optimizer() {
  return {{"name", "sgd"}, {"lr", 0.7}, {"momentum", 0.9}, {"nesterov", true}};
}

sdk::OptionSpecs DiLoCoModule::specs() {
  return {
      OptionSpec{"H", OptionType::PositiveInteger, 100,
                 "inner steps per outer step: the nodes average and take an outer step after the H-th, 2H-th, ... "
                 "inner step"},
      OptionSpec{"outer_optimizer", OptionType::Optimizer, default_outer_optimizer(),
                 "the outer optimizer, stepped on the master parameters with the pseudo-gradient "
                 "master - average; a partial object refines the default Nesterov SGD"},
  };
}

DiLoCoModule::DiLoCoModule(const nlohmann::json& o)
    : DiLoCoModule(o.at("H").get<int64_t>(), sdk::OptimizerSpec::from_json(o.at("outer_optimizer"), "outer_optimizer",
                                                                           default_outer_optimizer())) {}

DiLoCoModule::DiLoCoModule(int64_t H, sdk::OptimizerSpec outer_optimizer)
    : H_(H), outer_spec_(std::move(outer_optimizer)) {}

DiLoCoModule::~DiLoCoModule() = default;

void DiLoCoModule::init(sdk::NodeContext& /*ctx*/, sdk::Model& model) {
  // Every node keeps its own master copy and outer-optimizer state. All nodes
  // start identical (after the initial broadcast) and apply the same outer
  // step to the same average, so they stay identical without the reference's
  // rank-0 step + broadcast.
  params_.clear();
  master_.clear();
  for (auto& p : sdk::trainable_parameters(model)) {
    params_.push_back(p.detach());
    master_.push_back(p.detach().clone().set_requires_grad(true));
  }
  outer_ = outer_spec_.build(master_);
}

void DiLoCoModule::communicate(sdk::NodeContext& ctx, sdk::Model& /*model*/, int64_t step) {
  // Sync after every H inner steps: steps H-1, 2H-1, ... (0-based). The
  // reference synced when t % H == 0 && t > 0, which made the first round
  // H+1 inner steps long.
  if ((step + 1) % H_ != 0) return;
  // As the reference: one node has nobody to average with, and DiLoCo with
  // K = 1 is plain local training.
  if (ctx.num_nodes == 1) return;
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> list = params_;
  ctx.communicator().all_reduce(list, sdk::ReduceOp::Avg);  // params_ now hold the average
  for (size_t i = 0; i < master_.size(); ++i) {
    // Pseudo-gradient: old global minus new average (the negative of the
    // average update), a fresh tensor each round.
    master_[i].mutable_grad() = master_[i].detach() - params_[i];
  }
  outer_->step();
  // A copy, never the master itself: the reference aliased the master's
  // storage on CPU (bug B7), so later inner steps moved the master and every
  // later pseudo-gradient was 0.
  for (size_t i = 0; i < params_.size(); ++i) params_[i].copy_(master_[i].detach());
}

void DiLoCoModule::save_state(sdk::StateDict& out, const std::string& prefix) const {
  for (size_t i = 0; i < master_.size(); ++i) {
    out[prefix + "master." + std::to_string(i)] = master_[i].detach().clone();
  }
  // The outer momentum of the default (SGD) outer optimizer.
  if (auto* sgd = dynamic_cast<torch::optim::SGD*>(outer_.get())) {
    for (size_t i = 0; i < master_.size(); ++i) {
      auto it = sgd->state().find(state_key(*sgd, master_[i]));
      if (it == sgd->state().end()) continue;
      auto& state = static_cast<torch::optim::SGDParamState&>(*it->second);
      out[prefix + "momentum." + std::to_string(i)] = state.momentum_buffer().clone();
    }
  }
}

void DiLoCoModule::load_state(const sdk::StateDict& in, const std::string& prefix) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < master_.size(); ++i) {
    auto it = in.find(prefix + "master." + std::to_string(i));
    if (it == in.end()) throw sdk::Error("DiLoCo state: missing " + prefix + "master." + std::to_string(i));
    master_[i].detach().copy_(it->second);
  }
  if (auto* sgd = dynamic_cast<torch::optim::SGD*>(outer_.get())) {
    for (size_t i = 0; i < master_.size(); ++i) {
      auto it = in.find(prefix + "momentum." + std::to_string(i));
      if (it == in.end()) continue;
      auto state = std::make_unique<torch::optim::SGDParamState>();
      state->momentum_buffer(it->second.clone().to(master_[i].device()));
      sgd->state()[state_key(*sgd, master_[i])] = std::move(state);
    }
  }
}

}  // namespace exogym::modules
