#include "exogym/modules/diloco.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <string>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/optim.h"
#include "exogym/sdk/optim_state.h"

namespace exogym::modules {

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
  double squared_norm = 0;
  for (size_t i = 0; i < master_.size(); ++i) {
    // Pseudo-gradient: old global minus new average (the negative of the
    // average update), a fresh tensor each round.
    master_[i].mutable_grad() = master_[i].detach() - params_[i];
    squared_norm += master_[i].grad().square().sum().item<double>();
  }
  // Once per outer step: how far the nodes moved together, and the step
  // taken on it (read only: the trained values do not depend on them).
  ctx.record("pseudo_grad_norm", std::sqrt(squared_norm));
  ctx.record("outer_lr", sdk::get_lr(*outer_));
  outer_->step();
  // A copy, never the master itself: the reference aliased the master's
  // storage on CPU (bug B7), so later inner steps moved the master and every
  // later pseudo-gradient was 0.
  for (size_t i = 0; i < params_.size(); ++i) params_[i].copy_(master_[i].detach());
}

void DiLoCoModule::save_state(sdk::StateDict& out, const std::string& prefix) const {
  for (size_t i = 0; i < master_.size(); ++i) out[prefix + "master." + std::to_string(i)] = master_[i].detach();
  sdk::save_optimizer_state(*outer_, master_, out, prefix + "outer.");
}

void DiLoCoModule::load_state(const sdk::StateDict& in, const std::string& prefix) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < master_.size(); ++i) {
    auto it = in.find(prefix + "master." + std::to_string(i));
    if (it == in.end()) throw sdk::Error("DiLoCo state: missing " + prefix + "master." + std::to_string(i));
    master_[i].detach().copy_(it->second);
  }
  sdk::load_optimizer_state(*outer_, master_, in, prefix + "outer.");
}

void DiLoCoModule::load_recovery_state(sdk::Model& /*model*/, const sdk::StateDict& in, const std::string& prefix) {
  load_state(in, prefix);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) params_[i].copy_(master_[i].detach());
}

}  // namespace exogym::modules
