// Muon with its AdamW fallback (muon.h).
#include "exogym/sdk/internal/muon.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include "exogym/sdk/error.h"
#include "exogym/sdk/internal/optim_state_key.h"

namespace exogym::sdk::internal {

namespace {

// The reference implementation's coefficients: chosen there to push every
// singular value towards 1 as fast as possible, at the price of not
// converging exactly (they end in about [0.7, 1.2]), which training does not
// mind.
constexpr double kA = 3.4445, kB = -4.7750, kC = 2.0315;

}  // namespace

at::Tensor newton_schulz5(const at::Tensor& update, int64_t steps) {
  // Wide (rows <= cols): X X^T is then the smaller Gram matrix.
  const bool tall = update.size(0) > update.size(1);
  at::Tensor x = tall ? update.t() : update;
  x = x / (at::norm(x) + 1e-7);
  for (int64_t i = 0; i < steps; ++i) {
    const at::Tensor a = at::mm(x, x.t());
    const at::Tensor b = at::addmm(a, a, a, /*beta=*/kB, /*alpha=*/kC);  // b A + c A A
    x = at::addmm(x, b, x, /*beta=*/kA, /*alpha=*/1);                    // a X + B X
  }
  return tall ? x.t() : x;
}

std::unique_ptr<torch::optim::Optimizer> build_muon(const nlohmann::json& p, const std::vector<at::Tensor>& params) {
  if (std::none_of(params.begin(), params.end(), Muon::is_matrix)) {
    throw ConfigError("optimizer",
                      "muon needs at least one parameter with 2 or more dimensions (a weight matrix) "
                      "to orthogonalise, but the " +
                          std::to_string(params.size()) +
                          " parameters it is given are all vectors or scalars; use adamw for this model");
  }
  MuonOptions o(p.at("lr").get<double>());
  o.momentum = p.at("momentum").get<double>();
  o.nesterov = p.at("nesterov").get<bool>();
  o.ns_steps = p.at("ns_steps").get<int64_t>();
  o.weight_decay = p.at("weight_decay").get<double>();
  o.adamw_lr = p.at("adamw_lr").get<double>();
  o.adamw_beta1 = p.at("adamw_betas")[0].get<double>();
  o.adamw_beta2 = p.at("adamw_betas")[1].get<double>();
  o.adamw_eps = p.at("adamw_eps").get<double>();
  o.adamw_weight_decay = p.at("adamw_weight_decay").get<double>();
  return std::make_unique<Muon>(params, o);
}

Muon::Muon(const std::vector<at::Tensor>& params, const MuonOptions& options)
    : torch::optim::Optimizer(params, std::make_unique<MuonOptions>(options)) {}

at::Tensor Muon::step(LossClosure closure) {
  at::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups()) {
    const auto& options = static_cast<const MuonOptions&>(group.options());
    for (const auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (is_matrix(p))
        matrix_step(p, options);
      else
        adamw_step(p, options);
    }
  }
  return loss;
}

void Muon::matrix_step(const at::Tensor& param, const MuonOptions& o) {
  if (param.numel() == 0) return;  // nothing to orthogonalise, and no rows / cols
  const at::Tensor& grad = param.grad();
  const auto key = optimizer_state_key(state(), param);
  auto it = state().find(key);
  if (it == state().end()) {
    auto created = std::make_unique<MuonParamState>();
    created->momentum_buffer = at::zeros_like(param, at::MemoryFormat::Preserve);
    it = state().emplace(key, std::move(created)).first;
  }
  at::Tensor& buffer = static_cast<MuonParamState&>(*it->second).momentum_buffer;
  buffer.mul_(o.momentum).add_(grad);
  const at::Tensor update = o.nesterov ? grad.add(buffer, o.momentum) : buffer;

  const int64_t rows = param.size(0), cols = param.numel() / rows;
  const at::Tensor orthogonal = newton_schulz5(update.reshape({rows, cols}).to(at::kFloat), o.ns_steps);
  const double scale = std::sqrt(std::max(1.0, static_cast<double>(rows) / static_cast<double>(cols)));
  // Decoupled weight decay first, as AdamW's.
  if (o.weight_decay != 0) param.mul_(1 - o.lr * o.weight_decay);
  param.add_(orthogonal.reshape(param.sizes()).to(param.scalar_type()), -o.lr * scale);
}

// torch::optim::AdamW's step, operation for operation (so the same bits),
// with the fallback's hyper-parameters. LibTorch's state type, so that
// checkpoints read it as they read AdamW's.
void Muon::adamw_step(const at::Tensor& param, const MuonOptions& o) {
  const at::Tensor& grad = param.grad();
  const double lr = o.scheduled_adamw_lr();
  if (o.adamw_weight_decay != 0) param.mul_(1 - lr * o.adamw_weight_decay);
  const auto key = optimizer_state_key(state(), param);
  auto it = state().find(key);
  if (it == state().end()) {
    auto created = std::make_unique<torch::optim::AdamWParamState>();
    created->step(0);
    created->exp_avg(at::zeros_like(param, at::MemoryFormat::Preserve));
    created->exp_avg_sq(at::zeros_like(param, at::MemoryFormat::Preserve));
    it = state().emplace(key, std::move(created)).first;
  }
  auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
  s.step(s.step() + 1);
  const double bias_correction1 = 1 - std::pow(o.adamw_beta1, static_cast<double>(s.step()));
  const double bias_correction2 = 1 - std::pow(o.adamw_beta2, static_cast<double>(s.step()));
  s.exp_avg().mul_(o.adamw_beta1).add_(grad, 1 - o.adamw_beta1);
  s.exp_avg_sq().mul_(o.adamw_beta2).addcmul_(grad, grad, 1 - o.adamw_beta2);
  const at::Tensor denom = (s.exp_avg_sq().sqrt() / std::sqrt(bias_correction2)).add_(o.adamw_eps);
  param.addcdiv_(s.exp_avg(), denom, -(lr / bias_correction1));
}

}  // namespace exogym::sdk::internal
