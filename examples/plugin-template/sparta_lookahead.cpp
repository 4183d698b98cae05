// SPARTA with a Lookahead outer step: a strategy composed of a built-in
// module and one of its own. After every local step, SPARTA averages a small
// random subset of the parameters across the nodes (exogym::modules); then,
// every k steps, Lookahead (Zhang et al. 2019) moves this node's slow weights
// a fraction alpha of the way to its fast weights and restarts from them:
//   slow <- slow + alpha * (fast - slow);  fast <- slow
// Lookahead needs no communication: only the composition makes this a
// distributed strategy.
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "exogym/modules/aggregation/sparta.h"
#include "exogym/sdk/compose.h"
#include "exogym/sdk/error.h"

namespace {

using exogym::sdk::OptionSpec;
using exogym::sdk::OptionType;

class Lookahead final : public exogym::sdk::CommunicationModule {
 public:
  // The options it declares, under its name: the only ones it may read.
  static exogym::sdk::ModuleSpecs specs() {
    return {"Lookahead",
            {
                OptionSpec{"k", OptionType::PositiveInteger, 5, "local steps between Lookahead steps"},
                OptionSpec{"alpha", OptionType::Fraction, 0.5, "how far the slow weights move towards the fast ones"},
            }};
  }

  explicit Lookahead(const exogym::sdk::ModuleOptions& options)
      : k_(options.at("k").get<int64_t>()), alpha_(options.at("alpha").get<double>()) {}

  void init(exogym::sdk::NodeContext& /*ctx*/, exogym::sdk::Model& model) override {
    for (auto& p : exogym::sdk::trainable_parameters(model)) {
      fast_.push_back(p.detach());
      slow_.push_back(p.detach().clone());
    }
  }

  void communicate(exogym::sdk::NodeContext& /*ctx*/, exogym::sdk::Model& /*model*/, int64_t step) override {
    if ((step + 1) % k_ != 0) return;
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < fast_.size(); ++i) {
      slow_[i].add_(fast_[i] - slow_[i], alpha_);
      fast_[i].copy_(slow_[i]);
    }
  }

  // The slow weights are the state a checkpoint needs besides the model.
  void save_state(exogym::sdk::StateDict& out, const std::string& prefix) const override {
    for (size_t i = 0; i < slow_.size(); ++i) out[prefix + "slow." + std::to_string(i)] = slow_[i].clone();
  }
  void load_state(const exogym::sdk::StateDict& in, const std::string& prefix) override {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < slow_.size(); ++i) {
      const std::string key = prefix + "slow." + std::to_string(i);
      auto it = in.find(key);
      if (it == in.end()) throw exogym::sdk::Error("Lookahead state: missing " + key);
      slow_[i].copy_(it->second);
    }
  }

 private:
  int64_t k_;
  double alpha_;
  std::vector<at::Tensor> fast_;  // the model's parameters
  std::vector<at::Tensor> slow_;
};

}  // namespace

// The local step (optimizer, lr_schedule, max_norm), then SPARTA, then
// Lookahead; the strategy's options are the three parts' (p, selector,
// sparta_interval, k, alpha and the local step's).
EXOGYM_MODULE_STRATEGY_PLUGIN("sparta_lookahead", "1.0.0", exogym::modules::SpartaModule, Lookahead)
