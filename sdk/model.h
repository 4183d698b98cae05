#pragma once
// A model plugin: a batch of named tensors goes in, a scalar loss comes out.
// A classification model can derive from sdk::Classifier (classifier.h),
// which turns its logits into the loss and the accuracy.
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <map>
#include <string>
#include <vector>

namespace exogym::sdk {

struct Stack;  // stacked.h

// A batch of named tensors. The built-in datasets produce "input" and "target".
using Batch = std::map<std::string, at::Tensor>;

// Result of evaluating one batch. Metrics are scalar tensors holding the mean
// over the batch (e.g. "accuracy"); the runtime weights them by batch size.
struct EvalOutput {
  at::Tensor loss;
  std::map<std::string, at::Tensor> metrics;
};

// Lifetime: every node has its own replica, made by the plugin's factory on
// the main thread before training (node 0's first, right after LibTorch's
// default generator is seeded with the run's seed; the others' possibly at
// the same time on helper threads) from options already validated against
// the plugin's OptionSpecs. A ConfigError thrown by the constructor is
// reported under "model.options.<its path>". The runtime then moves the
// network to the node's device and into training mode. Replicas are
// destroyed on the main thread after every node has finished.
//
// Errors: an exception from loss() or evaluate() ends the run, as a
// strategy's does (strategy.h), naming the node, the step and the plugin.
class Model {
 public:
  virtual ~Model() = default;

  // The network (LibTorch's torch::nn::Module) that owns the parameters and
  // buffers, the same one every time. Named network(): in ExoGym a "module"
  // is a strategy's communication module (compose.h). The runtime uses it from any thread for train()/eval(),
  // to(device), the initial broadcast, averaging and model.pt.
  virtual torch::nn::Module& network() = 0;

  // The mean loss over the batch: a one-element tensor with a graph
  // attached, on which the runtime calls backward(). On the node's thread,
  // in training mode, once per micro-batch between the strategy's
  // zero_grad() and step(); the batch is on the node's device.
  virtual at::Tensor loss(const Batch& batch) = 0;

  // The loss and the metrics of metric_names() from one forward pass. On
  // node 0's thread (its own parameters) and node 1's (the average of every
  // node's), in evaluation mode under no_grad, at the evaluation steps
  // (before the step's zero_grad) and after the last step. Optional (default:
  // loss(batch) and no metrics).
  virtual EvalOutput evaluate(const Batch& batch) { return {loss(batch), {}}; }

  // Draws the initial parameters where they differ from what LibTorch's
  // layers draw (nanoGPT's N(0, 0.02), say): once, on node 0's replica, on
  // the main thread, with LibTorch's default generator seeded from the
  // manifest's seed. The other nodes start from node 0's parameters (the
  // initial broadcast) and skip it. Optional.
  virtual void init_parameters() {}

  // The names of the metrics evaluate() reports, read once on the main
  // thread before training (the CSV header is written up front). A name
  // evaluate() then does not report fails the run. Optional (default: none).
  virtual std::vector<std::string> metric_names() const { return {}; }

  // The parameters (names in network()) of 2 or more dimensions that are no
  // hidden layer's weights: input embeddings, the output head, weights tied
  // to them. Muon steps them with AdamW, as its reference does (optim.h).
  // Optional (default: none).
  virtual std::vector<std::string> embedding_and_head_parameters() const { return {}; }

  // Language models: the logits of the token that follows each row of
  // `tokens` ([B, T] int64), as [B, vocabulary]. Called by exogym-generate on
  // its main thread, in evaluation mode under no_grad. A model with a bounded
  // context crops each row to its last tokens. Optional: the default throws
  // sdk::Error (not a language model).
  virtual at::Tensor next_token_logits(const at::Tensor& tokens);

  // Stacked execution (sdk/stacked.h): the mean loss of each of K nodes,
  // a [K] tensor with a graph attached, from one computation: each field
  // of `batch` holds the K nodes' batches stacked ([K, B, ...]), and
  // `stack` the K nodes' parameters and buffers. Node k's loss is what
  // loss() gives on node k's replica with node k's batch, up to rounding,
  // its randomness drawn from stack.generators[k] as loss() draws it from
  // generator(). Called in training mode, under the same autocast as
  // loss(), on one thread for the K nodes, on any one of the K replicas:
  // compute with `stack`'s tensors only, never network()'s. On the CPU the
  // parts of a stack compute side by side, so calls for other parts may
  // run at once, each on another replica (as loss() runs per node). In the
  // first step a call that runs out of memory is made again for fewer
  // nodes, with their generators and buffers put back first: change no
  // other state.
  // Optional: a model that implements it says so in supports_stacking(),
  // which the runtime asks once, on the main thread; the default throws.
  virtual bool supports_stacking() const { return false; }
  virtual at::Tensor stacked_loss(const Stack& stack, const Batch& batch);

  // Randomness inside the model (dropout, ...) must come from this generator,
  // seeded per node by the runtime (LibTorch's default one is shared by all
  // threads: runs would depend on timing).
  void set_generator(at::Generator generator) { generator_ = std::move(generator); }
  const at::Generator& generator() const { return generator_; }

 private:
  at::Generator generator_;
};

// A trainable parameter and its name in the model's network
// ("layers.0.weight", "transformer.h.1.attn.c_attn.weight").
struct NamedParameter {
  std::string name;
  at::Tensor tensor;
};

// Every trainable parameter (requires_grad) with its name, in the network's
// registration order: the order of trainable_parameters() (compose.h), the
// same on every node. For strategies that group parameters by layer or
// name (fragments, per-layer rules) without relying on an order of their
// own. Inline, so that a plugin using it needs no newer SDK library.
inline std::vector<NamedParameter> named_trainable_parameters(Model& model) {
  std::vector<NamedParameter> params;
  for (const auto& item : model.network().named_parameters(/*recurse=*/true)) {
    if (item.value().requires_grad()) params.push_back({item.key(), item.value()});
  }
  return params;
}

// batch[key], or an error naming the missing key and the keys there are.
const at::Tensor& batch_tensor(const Batch& batch, const std::string& key);

// "[2, 3]": a shape for error messages.
std::string shape_of(const at::Tensor& tensor);

// Dropout that draws from an explicit generator (see Model::generator()).
// `channelwise` zeroes whole channels of an N x C x ... input (Dropout2d).
at::Tensor dropout(const at::Tensor& input, double p, bool training, const at::Generator& generator,
                   bool channelwise = false);

}  // namespace exogym::sdk
