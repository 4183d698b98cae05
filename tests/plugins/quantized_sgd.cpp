// docs/compression.md's example as a plugin: SGD on the nodes' gradients
// averaged as low-bit payloads (the compression library's compressed_mean
// with a QuantizeCompressor), with error feedback kept in checkpoints. It
// shows low-bit payloads working from a plugin: exact bytes in a run's
// accounting, and a bit-exact resume.
#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <string>
#include <vector>

#include "exogym/modules/compression/error_feedback.h"
#include "exogym/modules/compression/quantize_compressor.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/strategy.h"

namespace {

namespace sdk = exogym::sdk;
namespace modules = exogym::modules;

sdk::OptionSpecs quantized_sgd_options() {
  return {
      sdk::OptionSpec{"quantize", sdk::OptionType::String, "fp4", "the payloads' format", sdk::quant_format_names()},
      sdk::OptionSpec{"block", sdk::OptionType::PositiveInteger, sdk::kDefaultQuantBlock, "values per scale"},
      sdk::OptionSpec{"error_feedback", sdk::OptionType::Boolean, true, "keep what quantisation lost"},
      sdk::OptionSpec{"lr", sdk::OptionType::PositiveNumber, 0.1, "plain SGD learning rate"}};
}

class QuantizedSgd final : public sdk::Strategy {
 public:
  explicit QuantizedSgd(const nlohmann::json& o)
      : quantizer_(sdk::quant_format_from_name(o.at("quantize").get<std::string>(), "strategy.options.quantize"),
                   o.at("block").get<int64_t>()),
        error_feedback_(o.at("error_feedback").get<bool>()),
        lr_(o.at("lr").get<double>()) {}

  void init(sdk::NodeContext& ctx, sdk::Model& model) override {
    ctx_ = &ctx;
    params_ = model.network().parameters();
  }
  void zero_grad() override {
    for (auto& p : params_) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
  }
  void step() override {
    std::vector<modules::CompressedInput> inputs;
    for (size_t i = 0; i < params_.size(); ++i) {
      const at::Tensor& p = params_[i];
      const at::Tensor grad = p.grad().defined() ? p.grad() : at::zeros_like(p);
      inputs.push_back(
          {error_feedback_ ? feedback_.compress(i, quantizer_, grad) : quantizer_.compress(grad), grad.sizes().vec()});
    }
    const auto means = modules::compressed_mean(ctx_->communicator(), quantizer_, inputs);
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) params_[i].sub_(means[i] * lr_);
  }
  double lr() const override { return lr_; }
  void save_state(sdk::StateDict& out) const override { feedback_.save_state(out, "residual."); }
  void load_state(const sdk::StateDict& in) override { feedback_.load_state(in, "residual."); }

 private:
  modules::QuantizeCompressor quantizer_;
  bool error_feedback_;
  double lr_;
  modules::ErrorFeedback feedback_;
  sdk::NodeContext* ctx_ = nullptr;
  std::vector<at::Tensor> params_;
};

}  // namespace

EXOGYM_STRATEGY_PLUGIN("quantized_sgd", "1.0.0", QuantizedSgd, quantized_sgd_options)
