// "cnn": the reference's MNIST CNN (1,868,234 parameters with the defaults).
// Per block: [Conv3x3, BN, ReLU] x 2, MaxPool 2, channel dropout 0.25; then
// Flatten, Linear(-> hidden), ReLU, dropout 0.5, Linear(-> num_classes).
#include <ATen/ops/max_pool2d.h>
#include <ATen/ops/relu.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "exogym/sdk/classifier.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/options.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/stacked.h"

namespace exogym::models {

namespace {

using nlohmann::json;
using sdk::OptionType;

sdk::OptionSpecs cnn_options() {
  return {
      {"in_channels", OptionType::PositiveInteger, 1, "channels of the input images"},
      {"num_classes", OptionType::PositiveInteger, 10, "number of output classes"},
      {"image_size", OptionType::PositiveInteger, 28,
       "height and width of the (square) input images; divisible by 2^(number of blocks)"},
      {"channels", OptionType::IntegerList, json::array({64, 128}),
       "output channels of each convolution block (each block halves the image size)"},
      {"hidden", OptionType::PositiveInteger, 256, "width of the fully connected hidden layer"},
      {"dropout", OptionType::Boolean, true,
       "the reference's dropout: 0.25 per channel after each block, 0.5 in the head"},
  };
}

using sdk::batch_tensor;
using sdk::shape_of;

struct ConvBlock : torch::nn::Module {
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};

  ConvBlock(int64_t in, int64_t out) {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(1)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(out));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(out, out, 3).padding(1)));
    bn2 = register_module("bn2", torch::nn::BatchNorm2d(out));
  }

  at::Tensor forward(at::Tensor x) {
    x = at::relu(bn1->forward(conv1->forward(x)));
    x = at::relu(bn2->forward(conv2->forward(x)));
    return at::max_pool2d(x, {2, 2});
  }
};

// Parameter names: blocks.0.conv1.weight, blocks.0.bn1.running_mean, ...,
// fc1.weight, fc2.bias.
struct CnnNet : torch::nn::Module {
  torch::nn::ModuleList blocks;
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};

  CnnNet(int64_t in_channels, const std::vector<int64_t>& channels, int64_t flat, int64_t hidden, int64_t num_classes) {
    blocks = register_module("blocks", torch::nn::ModuleList());
    int64_t width = in_channels;
    for (int64_t out : channels) {
      blocks->push_back(std::make_shared<ConvBlock>(width, out));
      width = out;
    }
    fc1 = register_module("fc1", torch::nn::Linear(flat, hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, num_classes));
  }
};

class CnnModel : public sdk::Classifier {
 public:
  explicit CnnModel(const json& options)
      : in_channels_(options.at("in_channels").get<int64_t>()),
        image_size_(options.at("image_size").get<int64_t>()),
        dropout_(options.at("dropout").get<bool>()) {
    const auto channels = options.at("channels").get<std::vector<int64_t>>();
    if (channels.empty()) throw sdk::ConfigError("channels", "expected at least one convolution block, got []");
    const int64_t shrink = int64_t(1) << channels.size();
    if (channels.size() > 16 || image_size_ % shrink != 0)
      throw sdk::ConfigError("image_size", "expected a multiple of " + std::to_string(shrink) + " (each of the " +
                                               std::to_string(channels.size()) + " blocks halves it), got " +
                                               std::to_string(image_size_));
    const int64_t side = image_size_ / shrink;
    net_ = std::make_shared<CnnNet>(in_channels_, channels, channels.back() * side * side,
                                    options.at("hidden").get<int64_t>(), options.at("num_classes").get<int64_t>());
  }

  torch::nn::Module& network() override { return *net_; }

  // The classifier's last layer (Muon's reference steps the head with AdamW).
  std::vector<std::string> embedding_and_head_parameters() const override { return {"fc2.weight"}; }

  at::Tensor logits(const sdk::Batch& batch) override {
    const at::Tensor& input = batch_tensor(batch, "input");
    const int64_t per_example = in_channels_ * image_size_ * image_size_;
    const int64_t n = input.dim() == 0 ? 1 : input.size(0);
    // [N, C, H, W] as is; [N, H*W*C] or [N, H, W] (flat MNIST) reshaped.
    if (input.dim() == 0 || input.numel() != n * per_example)
      throw sdk::ConfigError("image_size", "the batch's \"input\" has shape " + shape_of(input) + ", expected [N, " +
                                               std::to_string(in_channels_) + ", " + std::to_string(image_size_) +
                                               ", " + std::to_string(image_size_) + "] or [N, " +
                                               std::to_string(per_example) + "]");
    at::Tensor x = input.reshape({n, in_channels_, image_size_, image_size_});
    const bool training = net_->is_training();
    for (const auto& block : *net_->blocks) {
      x = std::static_pointer_cast<ConvBlock>(block)->forward(x);
      x = sdk::dropout(x, dropout_ ? 0.25 : 0.0, training, generator(), /*channelwise=*/true);
    }
    x = at::relu(net_->fc1->forward(x.flatten(1)));
    x = sdk::dropout(x, dropout_ ? 0.5 : 0.0, training, generator());
    return net_->fc2->forward(x);
  }

  bool supports_stacking() const override { return true; }

  // logits() over stacks: the images of the K nodes in the grouped layout
  // (sdk/stacked.h), every convolution one grouped convolution.
  at::Tensor stacked_logits(const sdk::Stack& stack, const sdk::Batch& batch) override {
    const at::Tensor& input = batch_tensor(batch, "input");
    const int64_t K = stack.size(), per_example = in_channels_ * image_size_ * image_size_;
    if (input.dim() < 2 || input.size(0) != K || input.numel() != K * input.size(1) * per_example)
      throw sdk::ConfigError("image_size", "the stacked batch's \"input\" has shape " + shape_of(input) +
                                               ", expected [" + std::to_string(K) + ", N, " +
                                               std::to_string(per_example) + "] or [" + std::to_string(K) + ", N, " +
                                               std::to_string(in_channels_) + ", H, W]");
    const int64_t n = input.size(1);
    at::Tensor x = sdk::to_grouped(input.reshape({K, n, in_channels_, image_size_, image_size_}));
    for (size_t b = 0; b < net_->blocks->size(); ++b) {
      const std::string block = "blocks." + std::to_string(b) + ".";
      const auto& layers = *std::static_pointer_cast<ConvBlock>((*net_->blocks)[b]);
      for (int layer = 1; layer <= 2; ++layer) {
        const std::string conv = block + "conv" + std::to_string(layer) + ".",
                          bn = block + "bn" + std::to_string(layer) + ".";
        const auto& norm = (layer == 1 ? layers.bn1 : layers.bn2)->options;
        x = sdk::stacked_conv2d(x, stack.parameter(conv + "weight"), stack.parameter(conv + "bias"), 1, 1);
        // As BatchNorm2d's forward in training: count the batch, then
        // normalise with its statistics and update the running ones.
        stack.buffer(bn + "num_batches_tracked").add_(1);
        x = at::relu(sdk::stacked_batch_norm(x, stack.parameter(bn + "weight"), stack.parameter(bn + "bias"),
                                             stack.buffer(bn + "running_mean"), stack.buffer(bn + "running_var"), true,
                                             norm.momentum().value(), norm.eps()));
      }
      x = at::max_pool2d(x, {2, 2});
      x = sdk::to_grouped(
          sdk::stacked_dropout(sdk::from_grouped(x, K), dropout_ ? 0.25 : 0.0, true, stack.generators, true));
    }
    // [N, K*C, h, w] -> [K, N, C*h*w], node k's features in flatten(1)'s order.
    x = sdk::from_grouped(x, K).reshape({K, n, -1});
    x = at::relu(sdk::stacked_linear(x, stack.parameter("fc1.weight"), stack.parameter("fc1.bias")));
    x = sdk::stacked_dropout(x, dropout_ ? 0.5 : 0.0, true, stack.generators);
    return sdk::stacked_linear(x, stack.parameter("fc2.weight"), stack.parameter("fc2.bias"));
  }

 private:
  int64_t in_channels_;
  int64_t image_size_;
  bool dropout_;
  std::shared_ptr<CnnNet> net_;
};

}  // namespace

}  // namespace exogym::models

EXOGYM_MODEL_PLUGIN("cnn", "1.0.0", exogym::models::CnnModel, exogym::models::cnn_options)
