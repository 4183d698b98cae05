#include "exogym/sdk/strategy.h"

#include <torch/nn/module.h>

#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"

namespace exogym::sdk {

namespace {

const std::string kModelPrefix = "model.";
const std::string kStatePrefix = "state.";

}  // namespace

void Strategy::recovery_state(Model& model, StateDict& out) const {
  for (const auto& item : model.module().named_parameters()) out[kModelPrefix + item.key()] = item.value().detach();
  for (const auto& item : model.module().named_buffers()) out[kModelPrefix + item.key()] = item.value().detach();
  StateDict state;
  save_state(state);
  for (auto& [key, tensor] : state) out[kStatePrefix + key] = tensor;
}

void Strategy::load_recovery_state(Model& model, const StateDict& in) {
  at::NoGradGuard no_grad;
  auto copy_into = [&](const std::string& name, at::Tensor target) {
    auto it = in.find(kModelPrefix + name);
    if (it == in.end()) throw Error("recovery state: the donor sent no " + kModelPrefix + name);
    target.copy_(it->second);
  };
  for (const auto& item : model.module().named_parameters()) copy_into(item.key(), item.value().detach());
  for (const auto& item : model.module().named_buffers()) copy_into(item.key(), item.value().detach());
  StateDict state;
  for (const auto& [key, tensor] : in) {
    if (key.compare(0, kStatePrefix.size(), kStatePrefix) == 0) state[key.substr(kStatePrefix.size())] = tensor;
  }
  load_state(state);
}

}  // namespace exogym::sdk
