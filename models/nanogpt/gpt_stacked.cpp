// The GPT's forward over stacks (sdk/stacked.h): hidden() and head() of K
// nodes at once. The same layers in the same order as gpt.cpp's, the node
// one more leading dimension: linear layers are batched products, the
// embeddings one lookup into the K tables, attention runs over K·B
// sequences, and node k's dropout draws from its own generator in the
// order hidden() draws.
#include <ATen/ops/arange.h>
#include <ATen/ops/gelu.h>

#include <string>

#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/stacked.h"
#include "gpt.h"

namespace exogym::models::nanogpt {

namespace {

struct StackedForward {
  const sdk::Stack& stack;
  const GptConfig& config;

  const at::Tensor& param(const std::string& name) const { return stack.parameter(name); }
  at::Tensor maybe(const std::string& name) const { return config.bias ? stack.parameter(name) : at::Tensor(); }
  at::Tensor dropout(const at::Tensor& x) const {
    return sdk::stacked_dropout(x, config.dropout, true, stack.generators);
  }
  at::Tensor linear(const at::Tensor& x, const std::string& layer) const {
    return sdk::stacked_linear(x, param(layer + ".weight"), maybe(layer + ".bias"));
  }
  at::Tensor layer_norm(const at::Tensor& x, const std::string& layer) const {
    return sdk::stacked_layer_norm(x, param(layer + ".weight"), maybe(layer + ".bias"), 1e-5);
  }

  // x [K, B, T, C] -> the attention branch's output, as CausalSelfAttention.
  at::Tensor attention(const at::Tensor& x, const at::Tensor& future, const std::string& block) const {
    const int64_t K = x.size(0), B = x.size(1), T = x.size(2), C = config.n_embd, H = config.n_head, D = C / H;
    const auto qkv = linear(x, block + ".attn.c_attn").split(C, 3);
    // [K, B, T, C] -> [K·B, heads, T, D]: every node's sequences in one batch.
    const auto heads = [&](const at::Tensor& t) { return t.view({K * B, T, H, D}).transpose(1, 2); };
    const bool with_dropout = config.dropout > 0.0;
    at::Tensor y;
    if (x.is_cpu()) {
      // One node per thread: a batched product over K·B·heads small ones
      // splits each among the threads, far slower on the CPU.
      const auto q = heads(qkv[0]).view({K, B, H, T, D}).unbind(0), k = heads(qkv[1]).view({K, B, H, T, D}).unbind(0),
                 v = heads(qkv[2]).view({K, B, H, T, D}).unbind(0);
      y = sdk::stacked_map(
              K,
              [&](int64_t n) {
                const auto i = static_cast<size_t>(n);
                return causal_attention(q[i], k[i], v[i], future, with_dropout, [&](const at::Tensor& att) {
                  return sdk::dropout(att, config.dropout, true, stack.generators[i]);
                });
              },
              true)
              .view({K * B, H, T, D});
    } else {
      y = causal_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), future, with_dropout,
                           [&](const at::Tensor& att) {
                             return dropout(att.view({K, B, H, T, T})).view({K * B, H, T, T});
                           });
    }
    return dropout(linear(y.transpose(1, 2).contiguous().view({K, B, T, C}), block + ".attn.c_proj"));
  }

  at::Tensor mlp(const at::Tensor& x, const std::string& block) const {
    return dropout(linear(at::gelu(linear(x, block + ".mlp.c_fc")), block + ".mlp.c_proj"));
  }
};

}  // namespace

at::Tensor Gpt::stacked_hidden(const sdk::Stack& stack, const at::Tensor& tokens) {
  if (tokens.dim() != 3 || tokens.size(0) != stack.size()) {
    throw sdk::Error("nanogpt: expected stacked token ids of shape [" + std::to_string(stack.size()) + ", B, T], got " +
                     sdk::shape_of(tokens));
  }
  const int64_t K = tokens.size(0), T = tokens.size(2);
  const at::Tensor future = future_mask(T, tokens.device());
  const StackedForward f{stack, config_};
  const at::Tensor positions = at::arange(T, tokens.options().dtype(at::kLong)).expand({K, T});
  // wpe's rows [K, T, C] are every sequence's of a node: broadcast over B.
  at::Tensor x = sdk::stacked_embedding(f.param("transformer.wte.weight"), tokens) +
                 sdk::stacked_embedding(f.param("transformer.wpe.weight"), positions).unsqueeze(1);
  x = f.dropout(x);
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    const std::string block = "transformer.h." + std::to_string(i);
    x = x + f.attention(f.layer_norm(x, block + ".ln_1"), future, block);
    x = x + f.mlp(f.layer_norm(x, block + ".ln_2"), block);
  }
  return f.layer_norm(x, "transformer.ln_f");
}

at::Tensor Gpt::stacked_head(const sdk::Stack& stack, const at::Tensor& x) const {
  return sdk::stacked_linear(x, stack.parameter("transformer.wte.weight"), at::Tensor());
}

}  // namespace exogym::models::nanogpt
