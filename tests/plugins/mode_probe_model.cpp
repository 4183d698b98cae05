// A linear classifier that throws if it is asked for a training loss while in
// eval mode: catches a runtime that leaves node 0 in eval mode after an
// evaluation (the reference's bug B8).
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <stdexcept>

#include "exogym/sdk/model.h"
#include "exogym/sdk/plugin.h"

namespace {

exogym::sdk::OptionSpecs probe_options() {
  using exogym::sdk::OptionSpec;
  using exogym::sdk::OptionType;
  return {OptionSpec{"input_size", OptionType::PositiveInteger, 32, ""},
          OptionSpec{"num_classes", OptionType::PositiveInteger, 4, ""}};
}

struct ProbeNet : torch::nn::Module {
  ProbeNet(int64_t in, int64_t out) : linear(register_module("linear", torch::nn::Linear(in, out))) {}
  torch::nn::Linear linear;
};

class ModeProbeModel final : public exogym::sdk::Model {
 public:
  explicit ModeProbeModel(const nlohmann::json& o)
      : net_(std::make_shared<ProbeNet>(o.at("input_size").get<int64_t>(), o.at("num_classes").get<int64_t>())) {}
  torch::nn::Module& module() override { return *net_; }
  at::Tensor loss(const exogym::sdk::Batch& batch) override {
    if (!net_->is_training()) throw std::runtime_error("loss() called while the model is in eval mode");
    return forward_loss(batch);
  }
  exogym::sdk::EvalOutput evaluate(const exogym::sdk::Batch& batch) override {
    if (net_->is_training()) throw std::runtime_error("evaluate() called while the model is in train mode");
    return {forward_loss(batch), {}};
  }

 private:
  at::Tensor forward_loss(const exogym::sdk::Batch& batch) {
    return at::cross_entropy_loss(net_->linear(batch.at("input").flatten(1)), batch.at("target"));
  }
  std::shared_ptr<ProbeNet> net_;
};

}  // namespace

EXOGYM_MODEL_PLUGIN("mode_probe", "0.0.1", ModeProbeModel, probe_options)
