#include "exogym/modules/outer/outer_master.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/optim/optimizer.h>

#include <cmath>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/optim_state.h"
#include "exogym/sdk/shared.h"

namespace exogym::modules {

std::shared_ptr<OuterMaster> OuterMaster::in_process(sdk::NodeContext& ctx, const std::string& key,
                                                     const std::vector<at::Tensor>& params,
                                                     const sdk::OptimizerSpec& outer) {
  return sdk::shared_in_process<OuterMaster>(ctx, key, [&] { return std::make_shared<OuterMaster>(params, outer); });
}

OuterMaster::OuterMaster(const std::vector<at::Tensor>& params, const sdk::OptimizerSpec& outer) {
  for (const auto& p : params) master_.push_back(p.detach().clone().set_requires_grad(true));
  try {
    outer_ = outer.build(master_);
  } catch (const sdk::ConfigError& e) {
    // build() names the local optimizer's option (muon without a matrix to
    // orthogonalise, say); this is every DiLoCo's outer one.
    if (e.path() != "optimizer") throw;
    throw sdk::ConfigError("outer_optimizer", e.message());
  }
}

OuterMaster::~OuterMaster() = default;

void OuterMaster::step(int64_t step, const std::vector<at::Tensor>& received, Received kind) {
  EXOGYM_CHECK_INTERNAL(received.size() == master_.size(), "an outer step needs one tensor per master tensor");
  std::lock_guard<std::mutex> lock(mutex_);
  if (outer_step_ == step) return;
  at::NoGradGuard no_grad;
  double squared_norm = 0;
  for (size_t i = 0; i < master_.size(); ++i) {
    // Pseudo-gradient: old global minus new average (the negative of the
    // average update), a fresh tensor each round: the optimizer may keep it.
    master_[i].mutable_grad() =
        kind == Received::Average ? master_[i].detach() - received[i] : received[i].detach().clone();
    squared_norm += master_[i].grad().square().sum().item<double>();
  }
  pseudo_grad_norm_ = std::sqrt(squared_norm);
  outer_lr_ = sdk::get_lr(*outer_);
  outer_->step();
  // Not needed until the next round, which makes its own.
  for (auto& m : master_) m.mutable_grad().reset();
  outer_step_ = step;
}

void OuterMaster::mix_into(const std::vector<at::Tensor>& params, double alpha) const {
  EXOGYM_CHECK_INTERNAL(params.size() == master_.size(), "mixing needs one parameter per master tensor");
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    // alpha 0 copies: 0 * local + global could differ from global in the
    // sign of a zero, and DiLoCo's nodes continue from the master exactly.
    if (alpha == 0) {
      params[i].copy_(master_[i].detach());
    } else {
      params[i].mul_(alpha).add_(master_[i].detach(), 1 - alpha);
    }
  }
}

void OuterMaster::save(sdk::StateDict& out, const std::string& prefix) const {
  for (size_t i = 0; i < master_.size(); ++i) out[prefix + "master." + std::to_string(i)] = master_[i].detach();
  sdk::save_optimizer_state(*outer_, master_, out, prefix + "outer.");
  out[prefix + "outer_step"] = at::full({}, outer_step_, at::kLong);
}

void OuterMaster::load(const sdk::StateDict& in, const std::string& prefix, int64_t outer_step) {
  auto at_key = [&](const std::string& key) -> const at::Tensor& {
    auto it = in.find(prefix + key);
    if (it == in.end()) throw sdk::Error("outer state: missing " + prefix + key);
    return it->second;
  };
  std::lock_guard<std::mutex> lock(mutex_);
  // As fresh already: every node that took part in the same outer steps
  // holds the same state, so the process loads it once.
  if (!from_init_ && outer_step <= outer_step_) return;
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < master_.size(); ++i) master_[i].detach().copy_(at_key("master." + std::to_string(i)));
  sdk::load_optimizer_state(*outer_, master_, in, prefix + "outer.");
  outer_step_ = outer_step;
  from_init_ = false;
}

}  // namespace exogym::modules
