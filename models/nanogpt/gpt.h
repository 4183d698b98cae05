#pragma once
// The network of the "nanogpt" model plugin, apart from the plugin glue so
// that unit tests can reach the per-position logits: a GPT-2-style decoder
// as in nanoGPT (and the reference's example/nanogpt/nanogpt.py).
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "exogym/sdk/options.h"

namespace exogym::sdk {
struct Stack;
}

namespace exogym::models::nanogpt {

struct GptConfig {
  int64_t n_layer = 4, n_head = 4, n_embd = 128;
  int64_t block_size = 1024, vocab_size = 66;
  double dropout = 0.0;
  bool bias = true;
};

// The plugin's options: a size preset, explicit n_layer/n_head/n_embd that
// override it, block_size, vocab_size, dropout, bias.
sdk::OptionSpecs option_specs();

// The config of validated options. Throws sdk::ConfigError naming the option
// (relative to model.options) for a dropout >= 1 or an n_embd that n_head
// does not divide.
GptConfig config_from_options(const nlohmann::json& options);

// Causal self-attention of q, k, v [N, heads, T, D] -> [N, heads, T, D]
// (`future` [T, T] true above the diagonal); `dropout` is applied to the
// attention probabilities when `with_dropout`. The one core of the per-node
// and the stacked forward.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& future,
                            bool with_dropout, const std::function<at::Tensor(const at::Tensor&)>& dropout);

struct Transformer;

class Gpt : public torch::nn::Module {
 public:
  // The layers as LibTorch's constructors initialise them; init_parameters()
  // then gives nanoGPT's initialisation.
  explicit Gpt(const GptConfig& config);

  // nanoGPT's initialisation: linear and embedding weights ~ N(0, 0.02),
  // biases 0, every c_proj weight ~ N(0, 0.02 / sqrt(2 n_layer)). Draws
  // from LibTorch's default generator (the runtime seeds it before building).
  void init_parameters();

  const GptConfig& config() const { return config_; }

  // Token ids [B, T] (T <= block_size) -> the final LayerNorm's output
  // [B, T, n_embd]. Dropout (in training mode) draws from `generator`.
  at::Tensor hidden(const at::Tensor& tokens, const at::Generator& generator);
  // The tied LM head: x [..., n_embd] -> logits [..., vocab_size] = x · wteᵀ.
  at::Tensor head(const at::Tensor& x) const;
  // head(hidden(tokens)): [B, T, vocab_size].
  at::Tensor logits(const at::Tensor& tokens, const at::Generator& generator) {
    return head(hidden(tokens, generator));
  }

  // Stacked execution (sdk/stacked.h, gpt_stacked.cpp): hidden() and head()
  // of K nodes at once with the stack's tensors (named as this network's):
  // tokens [K, B, T] -> [K, B, T, n_embd] -> [K, B, T, vocab_size]. Node
  // k's dropout draws from stack.generators[k], as hidden() would.
  at::Tensor stacked_hidden(const sdk::Stack& stack, const at::Tensor& tokens);
  at::Tensor stacked_head(const sdk::Stack& stack, const at::Tensor& x) const;

  // The weight the head multiplies by: transformer.wte.weight itself.
  const at::Tensor& head_weight() const;

 private:
  // The causal mask for sequences of T tokens, on `device`; sdk::ConfigError
  // naming block_size when T is longer than the model's context.
  at::Tensor future_mask(int64_t T, const c10::Device& device);

  GptConfig config_;
  std::shared_ptr<Transformer> transformer_;
  // The causal mask, true above the diagonal. Not a buffer: it is a
  // constant, not state to broadcast, average or save; kept on the device
  // of the last input.
  at::Tensor future_;
};

}  // namespace exogym::models::nanogpt
