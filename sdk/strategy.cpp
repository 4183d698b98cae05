#include "exogym/sdk/strategy.h"

#include <torch/nn/module.h>

#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"

namespace exogym::sdk {

namespace {

const std::string kModelPrefix = "model.";
const std::string kStatePrefix = "state.";

}  // namespace

void save_model_tensors(Model& model, StateDict& out, bool parameters) {
  if (parameters) {
    for (const auto& item : model.network().named_parameters()) out[kModelPrefix + item.key()] = item.value().detach();
  }
  for (const auto& item : model.network().named_buffers()) out[kModelPrefix + item.key()] = item.value().detach();
}

void load_model_tensors(Model& model, const StateDict& in, bool parameters) {
  at::NoGradGuard no_grad;
  auto copy_into = [&](const std::string& name, const at::Tensor& target) {
    auto it = in.find(kModelPrefix + name);
    if (it == in.end()) throw Error("recovery state: the donor sent no " + kModelPrefix + name);
    target.detach().copy_(it->second);
  };
  if (parameters) {
    for (const auto& item : model.network().named_parameters()) copy_into(item.key(), item.value());
  }
  for (const auto& item : model.network().named_buffers()) copy_into(item.key(), item.value());
}

void Strategy::recovery_state(Model& model, StateDict& out) const {
  save_model_tensors(model, out);
  StateDict state;
  save_state(state);
  for (auto& [key, tensor] : state) out[kStatePrefix + key] = tensor;
}

void Strategy::load_recovery_state(Model& model, const StateDict& in) {
  load_model_tensors(model, in);
  StateDict state;
  for (const auto& [key, tensor] : in) {
    if (key.compare(0, kStatePrefix.size(), kStatePrefix) == 0) state[key.substr(kStatePrefix.size())] = tensor;
  }
  load_state(state);
}

}  // namespace exogym::sdk
