// "mlp": a multi-layer perceptron classifier. Each example's "input" is
// flattened to input_size features; hidden layers use the chosen activation
// followed by dropout; the loss is the mean cross-entropy against "target".
#include <ATen/ops/gelu.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/tanh.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "exogym/sdk/classifier.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/stacked.h"

namespace exogym::models {

namespace {

using nlohmann::json;
using sdk::OptionSpec;
using sdk::OptionType;

sdk::OptionSpecs mlp_options() {
  return {
      {"input_size", OptionType::PositiveInteger, 784, "features per example; inputs are flattened to this size"},
      {"hidden", OptionType::IntegerList, json::array({256}), "widths of the hidden layers ([] for a linear model)"},
      {"num_classes", OptionType::PositiveInteger, 10, "number of output classes"},
      {"dropout", OptionType::NonNegativeNumber, 0.0, "dropout probability after each hidden layer, in [0, 1)"},
      {"activation", OptionType::String, "relu", "activation after each hidden layer", {"relu", "gelu", "tanh"}},
  };
}

using sdk::batch_tensor;
using sdk::shape_of;

// The parameters live in a Module subclass (not in MlpModel) so that they get
// stable dotted names: layers.0.weight, layers.0.bias, layers.1.weight, ...
struct MlpNet : torch::nn::Module {
  torch::nn::ModuleList layers;

  MlpNet(int64_t input_size, const std::vector<int64_t>& hidden, int64_t num_classes) {
    layers = register_module("layers", torch::nn::ModuleList());
    int64_t width = input_size;
    for (int64_t next : hidden) {
      layers->push_back(torch::nn::Linear(width, next));
      width = next;
    }
    layers->push_back(torch::nn::Linear(width, num_classes));
  }
};

class MlpModel : public sdk::Classifier {
 public:
  explicit MlpModel(const json& options)
      : input_size_(options.at("input_size").get<int64_t>()),
        dropout_(options.at("dropout").get<double>()),
        activation_(options.at("activation").get<std::string>()) {
    if (dropout_ >= 1.0)
      throw sdk::ConfigError("dropout",
                             "expected a probability in [0, 1), got " + sdk::json_excerpt(options["dropout"]));
    net_ = std::make_shared<MlpNet>(input_size_, options.at("hidden").get<std::vector<int64_t>>(),
                                    options.at("num_classes").get<int64_t>());
  }

  torch::nn::Module& network() override { return *net_; }

  // The classifier's last layer (Muon's reference steps the head with AdamW).
  std::vector<std::string> embedding_and_head_parameters() const override {
    return {"layers." + std::to_string(net_->layers->size() - 1) + ".weight"};
  }

  at::Tensor logits(const sdk::Batch& batch) override {
    const at::Tensor& input = batch_tensor(batch, "input");
    const int64_t n = input.dim() == 0 ? 1 : input.size(0);
    if (input.dim() == 0 || input.numel() != n * input_size_)
      throw sdk::ConfigError("input_size", "the batch's \"input\" has shape " + shape_of(input) +
                                               ", which does not flatten to [N, " + std::to_string(input_size_) + "]");
    at::Tensor x = input.reshape({n, input_size_});
    const auto& layers = *net_->layers;
    for (size_t i = 0; i < layers.size(); ++i) {
      x = layers.ptr<torch::nn::LinearImpl>(i)->forward(x);
      if (i + 1 == layers.size()) break;  // logits: no activation, no dropout
      x = activation_ == "gelu" ? at::gelu(x) : activation_ == "tanh" ? at::tanh(x) : at::relu(x);
      x = sdk::dropout(x, dropout_, net_->is_training(), generator());
    }
    return x;
  }

  bool supports_stacking() const override { return true; }

  // logits() over stacks: the same layers, in the same order, node k's rows
  // with node k's weights (bit for bit on the CPU: sdk/stacked.h).
  at::Tensor stacked_logits(const sdk::Stack& stack, const sdk::Batch& batch) override {
    const at::Tensor& input = batch_tensor(batch, "input");
    const int64_t K = stack.size();
    if (input.dim() < 2 || input.size(0) != K || input.numel() != K * input.size(1) * input_size_)
      throw sdk::ConfigError("input_size", "the stacked batch's \"input\" has shape " + shape_of(input) +
                                               ", which does not flatten to [" + std::to_string(K) + ", N, " +
                                               std::to_string(input_size_) + "]");
    at::Tensor x = input.reshape({K, input.size(1), input_size_});
    const size_t layers = net_->layers->size();
    for (size_t i = 0; i < layers; ++i) {
      const std::string name = "layers." + std::to_string(i) + ".";
      x = sdk::stacked_linear(x, stack.parameter(name + "weight"), stack.parameter(name + "bias"));
      if (i + 1 == layers) break;
      x = activation_ == "gelu" ? at::gelu(x) : activation_ == "tanh" ? at::tanh(x) : at::relu(x);
      x = sdk::stacked_dropout(x, dropout_, true, stack.generators);
    }
    return x;
  }

 private:
  int64_t input_size_;
  double dropout_;
  std::string activation_;
  std::shared_ptr<MlpNet> net_;
};

}  // namespace

}  // namespace exogym::models

EXOGYM_MODEL_PLUGIN("mlp", "1.0.0", exogym::models::MlpModel, exogym::models::mlp_options)
