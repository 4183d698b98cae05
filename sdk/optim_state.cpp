// Saving and restoring LibTorch optimizers' per-parameter state for
// checkpoints (optim.h).
#include "exogym/sdk/optim_state.h"

#include <ATen/ATen.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exogym/sdk/error.h"
#include "exogym/sdk/internal/muon.h"
#include "exogym/sdk/internal/optim_state_key.h"
#include "exogym/sdk/internal/yogi.h"
#include "exogym/sdk/model.h"

namespace exogym::sdk {

namespace {

using torch::optim::OptimizerParamState;

// One parameter's state, field by field: its tensors (some undefined, e.g.
// max_exp_avg_sq without amsgrad) and, for optimizers that count, the step.
struct Fields {
  std::vector<std::pair<const char*, at::Tensor*>> tensors;
  int64_t* step = nullptr;
};

Fields fields_of(OptimizerParamState& state) {
  if (auto* s = dynamic_cast<torch::optim::AdamParamState*>(&state))
    return {{{"exp_avg", &s->exp_avg()}, {"exp_avg_sq", &s->exp_avg_sq()}, {"max_exp_avg_sq", &s->max_exp_avg_sq()}},
            &s->step()};
  if (auto* s = dynamic_cast<torch::optim::AdamWParamState*>(&state))
    return {{{"exp_avg", &s->exp_avg()}, {"exp_avg_sq", &s->exp_avg_sq()}, {"max_exp_avg_sq", &s->max_exp_avg_sq()}},
            &s->step()};
  if (auto* s = dynamic_cast<torch::optim::SGDParamState*>(&state))
    return {{{"momentum_buffer", &s->momentum_buffer()}}, nullptr};
  if (auto* s = dynamic_cast<torch::optim::RMSpropParamState*>(&state))
    return {
        {{"square_avg", &s->square_avg()}, {"momentum_buffer", &s->momentum_buffer()}, {"grad_avg", &s->grad_avg()}},
        &s->step()};
  if (auto* s = dynamic_cast<torch::optim::AdagradParamState*>(&state)) return {{{"sum", &s->sum()}}, &s->step()};
  if (auto* s = dynamic_cast<internal::MuonParamState*>(&state)) return {{{"momentum_buffer", &s->momentum_buffer}}};
  throw Error(
      "cannot checkpoint this optimizer's state: only adam, adamw, sgd, rmsprop, adagrad, muon and yogi are supported");
}

// "exp_avg, exp_avg_sq, ...": the tensors a state keeps, for errors.
std::string field_names(const Fields& fields) {
  std::string out;
  for (const auto& f : fields.tensors) out += (out.empty() ? "" : ", ") + std::string(f.first);
  return out;
}

// The state `optimizer` makes for `param` at its first step.
std::unique_ptr<OptimizerParamState> fresh_state(torch::optim::Optimizer& optimizer, const at::Tensor& param) {
  // Muon's fallback keeps LibTorch's AdamW state (internal/muon.h).
  if (auto* muon = dynamic_cast<internal::Muon*>(&optimizer)) {
    if (muon->orthogonalises(param)) return std::make_unique<internal::MuonParamState>();
    return std::make_unique<torch::optim::AdamWParamState>();
  }
  if (dynamic_cast<torch::optim::Adam*>(&optimizer) || dynamic_cast<internal::Yogi*>(&optimizer))
    return std::make_unique<torch::optim::AdamParamState>();
  if (dynamic_cast<torch::optim::AdamW*>(&optimizer)) return std::make_unique<torch::optim::AdamWParamState>();
  if (dynamic_cast<torch::optim::SGD*>(&optimizer)) return std::make_unique<torch::optim::SGDParamState>();
  if (dynamic_cast<torch::optim::RMSprop*>(&optimizer)) return std::make_unique<torch::optim::RMSpropParamState>();
  if (dynamic_cast<torch::optim::Adagrad*>(&optimizer)) return std::make_unique<torch::optim::AdagradParamState>();
  throw Error(
      "cannot restore this optimizer's state: only adam, adamw, sgd, rmsprop, adagrad, muon and yogi are supported");
}

bool has_key_with_prefix(const StateDict& in, const std::string& prefix) {
  auto it = in.lower_bound(prefix);
  return it != in.end() && it->first.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

void save_optimizer_state(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params, StateDict& out,
                          const std::string& prefix) {
  auto& state = optimizer.state();
  for (size_t i = 0; i < params.size(); ++i) {
    auto it = state.find(internal::optimizer_state_key(state, params[i]));
    if (it == state.end()) continue;
    const std::string base = prefix + std::to_string(i) + ".";
    Fields fields = fields_of(*it->second);
    for (const auto& [name, tensor] : fields.tensors)
      if (tensor->defined()) out[base + name] = *tensor;
    if (fields.step) out[base + "step"] = at::scalar_tensor(*fields.step, at::kLong);
  }
}

void load_optimizer_state(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params,
                          const StateDict& in, const std::string& prefix) {
  auto& state = optimizer.state();
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string base = prefix + std::to_string(i) + ".";
    const auto key = internal::optimizer_state_key(state, params[i]);
    if (!has_key_with_prefix(in, base)) {
      state.erase(key);
      continue;
    }
    std::unique_ptr<OptimizerParamState> restored = fresh_state(optimizer, params[i]);
    Fields fields = fields_of(*restored);
    // A field this parameter's state does not keep: the state of another
    // optimizer, or of muon with other matrices on its AdamW (adamw_params).
    for (auto it = in.lower_bound(base); it != in.end() && it->first.compare(0, base.size(), base) == 0; ++it) {
      const std::string field = it->first.substr(base.size());
      const bool known =
          (field == "step" && fields.step) ||
          std::any_of(fields.tensors.begin(), fields.tensors.end(), [&](const auto& f) { return field == f.first; });
      if (!known)
        throw Error("optimizer state " + it->first + ": this optimizer keeps " + field_names(fields) +
                    " for that parameter, not " + field +
                    " (was the state written by another optimizer, or by muon with other adamw_params?)");
    }
    for (const auto& [name, tensor] : fields.tensors) {
      auto it = in.find(base + name);
      if (it == in.end()) continue;
      if (it->second.sizes() != params[i].sizes())
        throw Error("optimizer state " + base + name + ": shape " + shape_of(it->second) +
                    " does not match its parameter's " + shape_of(params[i]));
      *tensor = it->second.to(params[i].device()).clone();
    }
    if (fields.step) {
      auto it = in.find(base + "step");
      if (it != in.end()) *fields.step = it->second.item<int64_t>();
    }
    state[key] = std::move(restored);
  }
}

std::vector<at::Tensor> optimizer_state_tensors(torch::optim::Optimizer& optimizer,
                                                const std::vector<at::Tensor>& params, const std::string& field) {
  auto& state = optimizer.state();
  std::vector<at::Tensor> found;
  for (const auto& param : params) {
    auto it = state.find(internal::optimizer_state_key(state, param));
    if (it == state.end()) {
      found.emplace_back();
      continue;
    }
    const Fields fields = fields_of(*it->second);
    const at::Tensor* match = nullptr;
    for (const auto& [name, tensor] : fields.tensors)
      if (name == field) match = tensor;
    if (!match)
      throw Error("optimizer state has no field \"" + field + "\": this optimizer keeps " + field_names(fields));
    found.push_back(*match);
  }
  return found;
}

}  // namespace exogym::sdk
