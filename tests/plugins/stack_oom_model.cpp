// A linear classifier whose stacked forward runs out of memory for passes of
// more than `most_stacked` nodes (0: any pass), as a stack too large for its
// device does. Before it does, the pass has drawn its dropout and counted
// itself in a buffer, as a real pass changes state before it runs out: the
// runtime must undo both to take the nodes again in smaller passes
// (train/stack_compute.cpp). Per node it trains, with the same draws.
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <new>

#include "exogym/sdk/model.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/stacked.h"

namespace {

constexpr double kDropout = 0.5;

struct Network : torch::nn::Module {
  explicit Network(const nlohmann::json& o)
      : linear(register_module(
            "linear", torch::nn::Linear(o.at("input_size").get<int64_t>(), o.at("num_classes").get<int64_t>()))),
        passes(register_buffer("passes", at::zeros({1}))) {}
  torch::nn::Linear linear;
  at::Tensor passes;  // the training forwards so far
};

class StackOomModel final : public exogym::sdk::Model {
 public:
  explicit StackOomModel(const nlohmann::json& o)
      : net_(std::make_shared<Network>(o)), most_stacked_(o.at("most_stacked").get<int64_t>()) {}
  torch::nn::Module& network() override { return *net_; }
  at::Tensor loss(const exogym::sdk::Batch& batch) override {
    {
      at::NoGradGuard no_grad;
      net_->passes.add_(1);
    }
    const at::Tensor x = exogym::sdk::dropout(batch.at("input").flatten(1), kDropout, true, generator());
    return at::cross_entropy_loss(net_->linear(x), batch.at("target"));
  }
  bool supports_stacking() const override { return true; }
  at::Tensor stacked_loss(const exogym::sdk::Stack& stack, const exogym::sdk::Batch& batch) override {
    {
      at::NoGradGuard no_grad;
      stack.buffers.at("passes").add_(1);
    }
    const at::Tensor x = exogym::sdk::stacked_dropout(batch.at("input").flatten(2), kDropout, true, stack.generators);
    if (most_stacked_ == 0 || x.size(0) > most_stacked_) throw std::bad_alloc();
    const at::Tensor logits =
        exogym::sdk::stacked_linear(x, stack.parameter("linear.weight"), stack.parameter("linear.bias"));
    return exogym::sdk::stacked_cross_entropy(logits, batch.at("target"));
  }

 private:
  std::shared_ptr<Network> net_;
  int64_t most_stacked_;
};

exogym::sdk::OptionSpecs options() {
  using exogym::sdk::OptionSpec;
  using exogym::sdk::OptionType;
  return {OptionSpec{"input_size", OptionType::PositiveInteger, 32, ""},
          OptionSpec{"num_classes", OptionType::PositiveInteger, 4, ""},
          OptionSpec{"most_stacked", OptionType::NonNegativeInteger, 0,
                     "the most nodes a stacked pass holds before it runs out of memory; 0: none"}};
}

}  // namespace

EXOGYM_MODEL_PLUGIN("stack_oom", "0.0.1", StackOomModel, options)
