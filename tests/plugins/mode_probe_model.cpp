// A linear classifier that throws if it is asked for a training loss while in
// eval mode: catches a runtime that leaves node 0 in eval mode after an
// evaluation, as the reference did (docs/differences.md#training-and-strategies).
#include <ATen/ATen.h>

#include <memory>
#include <stdexcept>

#include "exogym/sdk/model.h"
#include "exogym/sdk/plugin.h"
#include "linear_probe.h"

namespace {

class ModeProbeModel final : public exogym::sdk::Model {
 public:
  explicit ModeProbeModel(const nlohmann::json& o) : net_(std::make_shared<exogym::test::LinearProbe>(o)) {}
  torch::nn::Module& network() override { return *net_; }
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
  std::shared_ptr<exogym::test::LinearProbe> net_;
};

}  // namespace

EXOGYM_MODEL_PLUGIN("mode_probe", "0.0.1", ModeProbeModel, exogym::test::linear_probe_options)
