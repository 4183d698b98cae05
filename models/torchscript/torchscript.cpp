// "torchscript": a model from a TorchScript file, so that a PyTorch user
// brings a model without writing C++ (docs/from-pytorch.md). Every node
// gets its own copy of the module (script_network.h): the runtime broadcasts
// node 0's parameters, moves, stacks and saves the tensors under the
// module's own names, and switches train() and eval() as for any model.
//
// forward() takes the batch fields `inputs` names, in order; the loss is the
// mean cross-entropy of its output (logits [N, C]) against the field
// `target`, the mean squared error against it, or forward()'s own result
// ("returned": a scalar tensor, e.g. a language model that computes its loss).
#include <ATen/ops/argmax.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/mse_loss.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"
#include "exogym/sdk/plugin.h"
#include "script_network.h"

namespace exogym::models {

namespace {

using nlohmann::json;
using sdk::OptionSpec;
using sdk::OptionType;

sdk::OptionSpecs torchscript_options() {
  return {
      {"path",
       OptionType::Path,
       nullptr,
       "the TorchScript file (torch.jit.script(model).save(path) or torch.jit.trace), relative to the manifest's "
       "folder",
       {},
       /*required=*/true},
      {"inputs",
       OptionType::List,
       json::array({"input"}),
       "the batch fields forward() takes, in order",
       {},
       false,
       std::numeric_limits<int64_t>::max(),
       "",
       {OptionSpec{"<field>", OptionType::NonEmptyString, nullptr, "a batch field"}}},
      {"target", OptionType::NonEmptyString, "target", "the batch field the loss compares forward()'s output with"},
      {"loss",
       OptionType::String,
       "cross_entropy",
       "\"cross_entropy\" (forward returns logits [N, C]; target holds class indices), \"mse\" (against target), or "
       "\"returned\" (forward returns the loss itself, a scalar)",
       {"cross_entropy", "mse", "returned"}},
      {"metrics",
       OptionType::ChoiceSet,
       nullptr,
       "metrics evaluations report: [\"accuracy\"] (with cross_entropy only); default: accuracy with cross_entropy, "
       "none otherwise",
       {"accuracy"}},
  };
}

class TorchScriptModel : public sdk::Model {
 public:
  explicit TorchScriptModel(const json& options)
      : inputs_(options.at("inputs").get<std::vector<std::string>>()),
        target_(options.at("target").get<std::string>()),
        loss_(options.at("loss").get<std::string>()) {
    const std::string file = options.at("path").get<std::string>();
    net_ = std::make_shared<torchscript::ScriptNetwork>(file);
    const json& metrics = options.at("metrics");
    if (metrics.is_null()) {
      accuracy_ = loss_ == "cross_entropy";
    } else if (metrics.is_boolean()) {
      accuracy_ = metrics.get<bool>();
    } else {
      for (const auto& name : metrics) accuracy_ = accuracy_ || name == "accuracy";
    }
    if (accuracy_ && loss_ != "cross_entropy")
      throw sdk::ConfigError("metrics", "\"accuracy\" needs loss \"cross_entropy\" (logits against class indices)");
    check_signature(file);
    if (net_->parameters().empty()) throw sdk::ConfigError("path", file + ": the module has no parameters to train");
  }

  torch::nn::Module& network() override { return *net_; }

  at::Tensor loss(const sdk::Batch& batch) override { return scored(batch, forward(batch)); }

  sdk::EvalOutput evaluate(const sdk::Batch& batch) override {
    const at::Tensor output = forward(batch);
    sdk::EvalOutput out{scored(batch, output), {}};
    if (accuracy_) out.metrics["accuracy"] = at::argmax(output, -1).eq(target(batch)).to(at::kFloat).mean();
    return out;
  }

  std::vector<std::string> metric_names() const override {
    return accuracy_ ? std::vector<std::string>{"accuracy"} : std::vector<std::string>{};
  }

 private:
  // forward()'s arguments must be what `inputs` names: their number, and a
  // tensor returned unless loss is "returned" (which takes a scalar tensor).
  void check_signature(const std::string& file) const {
    const auto names = net_->argument_names();
    if (inputs_.size() < net_->required_arguments() || inputs_.size() > names.size()) {
      std::string list;
      for (const auto& name : names) list += (list.empty() ? "" : ", ") + name;
      throw sdk::ConfigError(
          "inputs",
          file + ": forward(" + list + ") takes " + std::to_string(net_->required_arguments()) +
              (names.size() > net_->required_arguments() ? " to " + std::to_string(names.size()) : std::string()) +
              " arguments, but inputs names " + std::to_string(inputs_.size()) + ": " + sdk::json_excerpt(inputs_));
    }
    if (!net_->returns_tensor())
      throw sdk::ConfigError("loss", file + ": forward() returns " + net_->return_type() + "; loss \"" + loss_ +
                                         "\" needs a tensor" +
                                         (loss_ == "returned" ? " (the scalar loss)" : " (the model's output)"));
  }

  at::Tensor forward(const sdk::Batch& batch) {
    std::vector<c10::IValue> args;
    for (const auto& name : inputs_) args.emplace_back(sdk::batch_tensor(batch, name));
    c10::IValue out = net_->forward(std::move(args));
    if (!out.isTensor()) throw sdk::Error("torchscript: forward() returned " + out.tagKind() + ", not a tensor");
    return out.toTensor();
  }

  at::Tensor target(const sdk::Batch& batch) const {
    const at::Tensor& t = sdk::batch_tensor(batch, target_);
    return loss_ == "cross_entropy" ? t.to(at::kLong) : t;
  }

  at::Tensor scored(const sdk::Batch& batch, const at::Tensor& output) const {
    if (loss_ == "returned") {
      if (output.numel() != 1)
        throw sdk::ConfigError(
            "loss", "\"returned\": forward() returned shape " + sdk::shape_of(output) + ", not the scalar loss");
      return output.reshape({});
    }
    if (loss_ == "mse") return at::mse_loss(output, target(batch).to(output.scalar_type()));
    return at::cross_entropy_loss(output.reshape({-1, output.size(-1)}), target(batch).reshape({-1}));
  }

  std::vector<std::string> inputs_;
  std::string target_, loss_;
  bool accuracy_ = false;
  std::shared_ptr<torchscript::ScriptNetwork> net_;
};

}  // namespace

}  // namespace exogym::models

EXOGYM_MODEL_PLUGIN("torchscript", "1.0.0", exogym::models::TorchScriptModel, exogym::models::torchscript_options)
