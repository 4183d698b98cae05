// Muon with its AdamW fallback (muon.h).
#include "exogym/sdk/internal/muon.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exogym/sdk/error.h"
#include "exogym/sdk/internal/optim_state_key.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/name_pattern.h"

namespace exogym::sdk::internal {

namespace {

// The reference implementation's coefficients: chosen there to push every
// singular value towards 1 as fast as possible, at the price of not
// converging exactly (they end in about [0.7, 1.2]), which training does not
// mind.
constexpr double kA = 3.4445, kB = -4.7750, kC = 2.0315;

}  // namespace

at::Tensor newton_schulz5(const at::Tensor& update, int64_t steps) {
  if (update.dim() == 3) {
    // K matrices at once: the same iteration, each norm its matrix's.
    const bool tall = update.size(1) > update.size(2);
    at::Tensor x = tall ? update.transpose(1, 2) : update;
    x = x / (at::norm(x, 2, {1, 2}, /*keepdim=*/true) + 1e-7);
    for (int64_t i = 0; i < steps; ++i) {
      const at::Tensor a = at::bmm(x, x.transpose(1, 2));
      const at::Tensor b = at::baddbmm(a, a, a, /*beta=*/kB, /*alpha=*/kC);
      x = at::baddbmm(x, b, x, /*beta=*/kA, /*alpha=*/1);
    }
    return tall ? x.transpose(1, 2) : x;
  }
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

namespace {

std::string listed(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "\"" : ", \"") + name + "\"";
  return out;
}

// The matrices of `params` that take AdamW's step: those adamw_params'
// patterns match or, where it is null, those the model declares.
std::vector<at::Tensor> adamw_matrices(const nlohmann::json& patterns, const std::vector<at::Tensor>& params,
                                       Model* model) {
  if (patterns.is_array() && patterns.empty()) return {};
  if (model == nullptr) {
    if (patterns.is_null()) return {};
    throw ConfigError("optimizer.adamw_params",
                      "this optimizer is built without the model (an outer optimizer, say), so its parameters have "
                      "no names to match; leave adamw_params out");
  }
  // params' names in the network.
  std::map<const c10::TensorImpl*, std::string> name_of;
  std::vector<std::string> known;
  for (const auto& item : model->network().named_parameters(/*recurse=*/true)) {
    name_of.emplace(item.value().unsafeGetTensorImpl(), item.key());
    known.push_back(item.key());
  }
  const auto is_known = [&](const std::string& pattern) {
    return std::any_of(known.begin(), known.end(), [&](const std::string& n) { return glob_match(pattern, n); });
  };
  // Null: the names the model declares (a name is a pattern matching itself).
  std::vector<std::string> chosen;
  if (patterns.is_null()) {
    chosen = model->embedding_and_head_parameters();
    for (const auto& name : chosen) {
      if (!is_known(name))
        throw Error("the model's embedding_and_head_parameters() names \"" + name +
                    "\", which its network() has no parameter of; it has " + listed(known));
    }
  } else {
    for (size_t i = 0; i < patterns.size(); ++i) {
      chosen.push_back(patterns[i]);
      if (!is_known(chosen.back()))
        throw ConfigError("optimizer.adamw_params[" + std::to_string(i) + "]",
                          "the pattern \"" + chosen.back() + "\" matches no parameter; the model has " + listed(known));
    }
  }
  std::vector<at::Tensor> out;
  for (const auto& p : params) {
    auto it = name_of.find(p.unsafeGetTensorImpl());
    if (p.dim() >= 2 && it != name_of.end() &&
        std::any_of(chosen.begin(), chosen.end(), [&](const std::string& c) { return glob_match(c, it->second); }))
      out.push_back(p);
  }
  return out;
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> build_muon(const nlohmann::json& p, const std::vector<at::Tensor>& params,
                                                    Model* model) {
  const std::vector<at::Tensor> to_adamw = adamw_matrices(p.at("adamw_params"), params, model);
  const auto matrices = std::count_if(params.begin(), params.end(), [](const at::Tensor& t) { return t.dim() >= 2; });
  if (matrices == 0) {
    throw ConfigError("optimizer",
                      "muon needs at least one parameter with 2 or more dimensions (a weight matrix) "
                      "to orthogonalise, but the " +
                          std::to_string(params.size()) +
                          " parameters it is given are all vectors or scalars; use adamw for this model");
  }
  if (static_cast<size_t>(matrices) == to_adamw.size()) {
    const std::string why = p.at("adamw_params").is_null() ? "the model declares them its embeddings or output head"
                                                           : "adamw_params picks them";
    throw ConfigError("optimizer", "muon has no matrix left to orthogonalise: all " + std::to_string(matrices) +
                                       " take AdamW's step, as " + why +
                                       "; use adamw for this model, or adamw_params [] to orthogonalise every matrix");
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
  return std::make_unique<Muon>(params, o, to_adamw);
}

Muon::Muon(const std::vector<at::Tensor>& params, const MuonOptions& options,
           const std::vector<at::Tensor>& adamw_matrices, bool stacked)
    : torch::optim::Optimizer(params, std::make_unique<MuonOptions>(options)), stacked_(stacked) {
  for (const auto& p : adamw_matrices) adamw_matrices_.insert(p.unsafeGetTensorImpl());
}

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
      if (orthogonalises(p))
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

  // A stack's rows are the nodes' matrices (muon.h).
  const int64_t count = stacked_ ? param.size(0) : 1;
  const int64_t rows = param.size(stacked_ ? 1 : 0), cols = param.numel() / count / rows;
  at::Tensor orthogonal;
  if (!stacked_) {
    orthogonal = newton_schulz5(update.reshape({rows, cols}).to(at::kFloat), o.ns_steps);
  } else if (param.device().is_cpu()) {
    // Each node's matrix by itself, from a tensor of its own as the node's
    // update is (MKL's products round by where an operand starts in
    // memory): its own step's bits.
    const at::Tensor matrices = update.reshape({count, rows, cols}).to(at::kFloat);
    std::vector<at::Tensor> each;
    for (int64_t k = 0; k < count; ++k) each.push_back(newton_schulz5(matrices[k].clone(), o.ns_steps));
    orthogonal = at::stack(each);
  } else {
    orthogonal = newton_schulz5(update.reshape({count, rows, cols}).to(at::kFloat), o.ns_steps);
  }
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
