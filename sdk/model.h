#pragma once
// A model plugin: a batch of named tensors goes in, a scalar loss comes out.
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <map>
#include <string>
#include <vector>

namespace exogym::sdk {

// A batch of named tensors. The built-in datasets produce "input" and "target".
using Batch = std::map<std::string, at::Tensor>;

// Result of evaluating one batch. Metrics are scalar tensors holding the mean
// over the batch (e.g. "accuracy"); the runtime weights them by batch size.
struct EvalOutput {
  at::Tensor loss;
  std::map<std::string, at::Tensor> metrics;
};

class Model {
 public:
  virtual ~Model() = default;

  // The module that owns the parameters and buffers. The runtime uses it for
  // train()/eval(), to(device), parameter broadcast, averaging and model.pt.
  virtual torch::nn::Module& module() = 0;

  // Mean loss over the batch, a scalar with a graph attached (training).
  virtual at::Tensor loss(const Batch& batch) = 0;

  // Loss and extra metrics from one forward pass (evaluation, under no_grad).
  virtual EvalOutput evaluate(const Batch& batch) { return {loss(batch), {}}; }

  // Draws the initial parameters where they differ from what LibTorch's
  // layers draw in their constructors (nanoGPT's N(0, 0.02), say). The
  // runtime calls it once, on node 0's replica, right after constructing it
  // with LibTorch's default generator seeded from the manifest's seed. Every
  // other node starts from node 0's parameters (the initial broadcast), so
  // their replicas skip it: the draws would be thrown away (0.15 s of
  // start-up for 16 nanoGPT replicas). A model whose constructor
  // initialises everything needs no override.
  virtual void init_parameters() {}

  // Names of the metrics evaluate() reports, known before the first batch so
  // the run's CSV header can be written up front.
  virtual std::vector<std::string> metric_names() const { return {}; }

  // Language models: the logits of the token that follows each row of
  // `tokens` ([B, T] int64), as [B, vocabulary] (evaluation, under no_grad).
  // A model with a bounded context crops each row to its last tokens. Used by
  // exogym-generate; the default throws sdk::Error (not a language model).
  virtual at::Tensor next_token_logits(const at::Tensor& tokens);

  // Randomness inside the model (dropout, ...) must come from this generator:
  // the runtime seeds one per node, so runs are bit-for-bit reproducible
  // whatever the thread scheduling. (LibTorch's default generator is shared
  // by all threads, so drawing from it would make runs depend on timing.)
  void set_generator(at::Generator generator) { generator_ = std::move(generator); }
  const at::Generator& generator() const { return generator_; }

 private:
  at::Generator generator_;
};

// batch[key], or an error naming the missing key and the keys there are.
const at::Tensor& batch_tensor(const Batch& batch, const std::string& key);

// Classification: mean cross-entropy of `logits` [N, C] against integer
// `target` [N], and the "accuracy" metric, from one forward pass.
EvalOutput classification_eval(const at::Tensor& logits, const at::Tensor& target);

// "[2, 3]": a shape for error messages.
std::string shape_of(const at::Tensor& tensor);

// Dropout that draws from an explicit generator (see Model::generator()).
// `channelwise` zeroes whole channels of an N x C x ... input (Dropout2d).
at::Tensor dropout(const at::Tensor& input, double p, bool training, const at::Generator& generator,
                   bool channelwise = false);

}  // namespace exogym::sdk
