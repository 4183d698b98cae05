// Yogi (yogi.h).
#include "exogym/sdk/internal/yogi.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/optim/adam.h>

#include <cmath>
#include <utility>

#include "exogym/sdk/internal/optim_state_key.h"

namespace exogym::sdk::internal {

std::unique_ptr<torch::optim::Optimizer> build_yogi(const nlohmann::json& p, const std::vector<at::Tensor>& params) {
  YogiOptions o(p.at("lr").get<double>());
  o.beta1 = p.at("betas")[0].get<double>();
  o.beta2 = p.at("betas")[1].get<double>();
  o.eps = p.at("eps").get<double>();
  o.initial_accumulator_value = p.at("initial_accumulator_value").get<double>();
  o.weight_decay = p.at("weight_decay").get<double>();
  o.bias_correction = p.at("bias_correction").get<bool>();
  return std::make_unique<Yogi>(params, o);
}

Yogi::Yogi(const std::vector<at::Tensor>& params, const YogiOptions& options)
    : torch::optim::Optimizer(params, std::make_unique<YogiOptions>(options)) {}

at::Tensor Yogi::step(LossClosure closure) {
  at::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const YogiOptions&>(group.options());
    for (const auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      at::Tensor g = p.grad();
      if (o.weight_decay != 0) g = g.add(p, o.weight_decay);
      const auto key = optimizer_state_key(state(), p);
      auto it = state().find(key);
      if (it == state().end()) {
        auto created = std::make_unique<torch::optim::AdamParamState>();
        created->step(0);
        created->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        created->exp_avg_sq(at::full_like(p, o.initial_accumulator_value, at::MemoryFormat::Preserve));
        it = state().emplace(key, std::move(created)).first;
      }
      auto& s = static_cast<torch::optim::AdamParamState&>(*it->second);
      s.step(s.step() + 1);
      s.exp_avg().mul_(o.beta1).add_(g, 1 - o.beta1);
      const at::Tensor g2 = g * g;
      // v - (1 - beta2) * sign(v - g²) * g²
      s.exp_avg_sq().addcmul_(at::sign(s.exp_avg_sq() - g2), g2, -(1 - o.beta2));
      double step_size = o.lr;
      if (o.bias_correction) {
        const double t = static_cast<double>(s.step());
        step_size *= std::sqrt(1 - std::pow(o.beta2, t)) / (1 - std::pow(o.beta1, t));
      }
      p.addcdiv_(s.exp_avg(), s.exp_avg_sq().sqrt().add_(o.eps), -step_size);
    }
  }
  return loss;
}

}  // namespace exogym::sdk::internal
