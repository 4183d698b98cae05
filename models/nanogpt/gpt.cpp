#include "gpt.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/zeros.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <ATen/ops/scaled_dot_product_attention.h>
#endif

#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/option_validation.h"

namespace exogym::models::nanogpt {

namespace {

using nlohmann::json;
using sdk::OptionType;

struct Preset {
  int64_t n_layer, n_head, n_embd;
};

// The reference's GPTConfig constructors gpt2_small ... gpt2_xl.
const std::map<std::string, Preset>& presets() {
  static const std::map<std::string, Preset> table = {
      {"small", {4, 4, 128}},     {"sbase", {8, 8, 512}},    {"base", {12, 12, 768}},
      {"medium", {24, 16, 1024}}, {"large", {36, 20, 1280}}, {"xl", {48, 25, 1600}},
  };
  return table;
}

// Dropout's switch and randomness, handed down the blocks.
struct ForwardContext {
  bool training;
  double dropout;
  const at::Generator& generator;
};

torch::nn::Linear linear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

}  // namespace

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& future,
                            bool with_dropout, const std::function<at::Tensor(const at::Tensor&)>& dropout) {
#if TORCH_VERSION_MAJOR >= 2
  // The fused kernel would draw attention dropout from LibTorch's global
  // generator, which the node threads share: with dropout in training the
  // explicit path below keeps runs reproducible.
  if (!with_dropout) return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
#endif
  // LibTorch 1.13 has no fused attention: one batched matmul for q·kᵀ (q
  // scaled first: T·D multiplications instead of T·T), the mask sliced to
  // T, softmax, one matmul with v.
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  at::Tensor att = at::matmul(q * scale, k.transpose(-2, -1));
  att = at::softmax(att.masked_fill(future, -std::numeric_limits<double>::infinity()), -1);
  return at::matmul(with_dropout ? dropout(att) : att, v);
}

// nanoGPT's LayerNorm: eps 1e-5, bias optional.
struct LayerNorm : torch::nn::Module {
  at::Tensor weight, bias;
  int64_t width;

  LayerNorm(int64_t n, bool with_bias) : width(n) {
    weight = register_parameter("weight", at::ones({n}));
    if (with_bias) bias = register_parameter("bias", at::zeros({n}));
  }

  at::Tensor forward(const at::Tensor& x) const { return at::layer_norm(x, {width}, weight, bias, 1e-5); }
};

struct CausalSelfAttention : torch::nn::Module {
  torch::nn::Linear c_attn{nullptr}, c_proj{nullptr};
  int64_t n_head, n_embd;

  explicit CausalSelfAttention(const GptConfig& c) : n_head(c.n_head), n_embd(c.n_embd) {
    c_attn = register_module("c_attn", linear(c.n_embd, 3 * c.n_embd, c.bias));
    c_proj = register_module("c_proj", linear(c.n_embd, c.n_embd, c.bias));
  }

  // `future` [T, T] is true where a query must not look (later positions).
  at::Tensor forward(const at::Tensor& x, const at::Tensor& future, const ForwardContext& f) {
    const int64_t B = x.size(0), T = x.size(1), C = n_embd, D = C / n_head;
    const auto qkv = c_attn->forward(x).split(C, 2);
    // [B, T, C] -> [B, heads, T, D]
    const auto heads = [&](const at::Tensor& t) { return t.view({B, T, n_head, D}).transpose(1, 2); };
    const at::Tensor y =
        causal_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), future, f.training && f.dropout > 0.0,
                         [&](const at::Tensor& att) { return sdk::dropout(att, f.dropout, f.training, f.generator); });
    return sdk::dropout(c_proj->forward(y.transpose(1, 2).contiguous().view({B, T, C})), f.dropout, f.training,
                        f.generator);
  }
};

struct Mlp : torch::nn::Module {
  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};

  explicit Mlp(const GptConfig& c) {
    c_fc = register_module("c_fc", linear(c.n_embd, 4 * c.n_embd, c.bias));
    c_proj = register_module("c_proj", linear(4 * c.n_embd, c.n_embd, c.bias));
  }

  at::Tensor forward(const at::Tensor& x, const ForwardContext& f) {
    return sdk::dropout(c_proj->forward(at::gelu(c_fc->forward(x))), f.dropout, f.training, f.generator);
  }
};

struct Block : torch::nn::Module {
  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<Mlp> mlp;

  explicit Block(const GptConfig& c) {
    ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(c.n_embd, c.bias));
    attn = register_module("attn", std::make_shared<CausalSelfAttention>(c));
    ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(c.n_embd, c.bias));
    mlp = register_module("mlp", std::make_shared<Mlp>(c));
  }

  at::Tensor forward(at::Tensor x, const at::Tensor& future, const ForwardContext& f) {
    x = x + attn->forward(ln_1->forward(x), future, f);
    return x + mlp->forward(ln_2->forward(x), f);
  }
};

struct Transformer : torch::nn::Module {
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  torch::nn::ModuleList h;
  std::shared_ptr<LayerNorm> ln_f;

  explicit Transformer(const GptConfig& c) {
    wte = register_module("wte", torch::nn::Embedding(c.vocab_size, c.n_embd));
    wpe = register_module("wpe", torch::nn::Embedding(c.block_size, c.n_embd));
    h = register_module("h", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.n_layer; ++i) h->push_back(std::make_shared<Block>(c));
    ln_f = register_module("ln_f", std::make_shared<LayerNorm>(c.n_embd, c.bias));
  }
};

sdk::OptionSpecs option_specs() {
  return {
      {"size",
       OptionType::String,
       "small",
       "preset n_layer/n_head/n_embd: small 4/4/128, sbase 8/8/512, base 12/12/768 (GPT-2), medium 24/16/1024, "
       "large 36/20/1280, xl 48/25/1600",
       {"small", "sbase", "base", "medium", "large", "xl"}},
      {"n_layer", OptionType::PositiveInteger, nullptr, "transformer blocks; null: the preset's"},
      {"n_head", OptionType::PositiveInteger, nullptr, "attention heads per block; null: the preset's"},
      {"n_embd", OptionType::PositiveInteger, nullptr, "model width, a multiple of n_head; null: the preset's"},
      {"block_size", OptionType::PositiveInteger, 1024,
       "longest context (learned positions); at least the dataset's block_size"},
      {"vocab_size", OptionType::PositiveInteger, 66,
       "token ids the model reads and predicts (66: text-char's reference vocabulary; 50304 for GPT-2 tokens)"},
      {"dropout", OptionType::NonNegativeNumber, 0.0,
       "dropout on the embeddings, attention probabilities and residual branches, in [0, 1)"},
      {"bias", OptionType::Boolean, true, "biases in the linear layers and LayerNorms"},
  };
}

GptConfig config_from_options(const json& options) {
  GptConfig c;
  const Preset preset = presets().at(options.at("size").get<std::string>());
  const auto pick = [&](const char* key, int64_t fallback) {
    return options.at(key).is_null() ? fallback : options.at(key).get<int64_t>();
  };
  c.n_layer = pick("n_layer", preset.n_layer);
  c.n_head = pick("n_head", preset.n_head);
  c.n_embd = pick("n_embd", preset.n_embd);
  c.block_size = options.at("block_size").get<int64_t>();
  c.vocab_size = options.at("vocab_size").get<int64_t>();
  c.dropout = options.at("dropout").get<double>();
  c.bias = options.at("bias").get<bool>();
  if (c.dropout >= 1.0)
    throw sdk::ConfigError("dropout", "expected a probability in [0, 1), got " + sdk::json_excerpt(options["dropout"]));
  if (c.n_embd % c.n_head != 0) {
    // Every preset divides, so at least one of the two was given: name it
    // (n_embd when both were).
    const std::string option = options.at("n_embd").is_null() ? "n_head" : "n_embd";
    throw sdk::ConfigError(option, "n_embd = " + std::to_string(c.n_embd) + " is not divisible by n_head = " +
                                       std::to_string(c.n_head) + " (each head attends in n_embd / n_head dimensions)");
  }
  return c;
}

Gpt::Gpt(const GptConfig& config) : config_(config) {
  transformer_ = register_module("transformer", std::make_shared<Transformer>(config));
  future_ = at::ones({config.block_size, config.block_size}, at::kBool).triu(1);
}

void Gpt::init_parameters() {
  // c_proj weights project into the residual stream: their smaller scale
  // keeps its variance from growing with depth (GPT-2's scheme).
  at::NoGradGuard no_grad;
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.n_layer));
  const auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  for (auto& item : named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    at::Tensor& p = item.value();
    if (name.find(".ln_") != std::string::npos) continue;  // LayerNorms: weight 1, bias 0
    if (ends_with(name, ".bias")) {
      p.zero_();
    } else if (ends_with(name, "c_proj.weight")) {
      p.normal_(0.0, proj_std);
    } else {
      p.normal_(0.0, 0.02);
    }
  }
}

at::Tensor Gpt::hidden(const at::Tensor& tokens, const at::Generator& generator) {
  if (tokens.dim() != 2) {
    throw sdk::Error("nanogpt: expected token ids of shape [B, T], got " + sdk::shape_of(tokens));
  }
  const int64_t T = tokens.size(1);
  const at::Tensor future = future_mask(T, tokens.device());
  const at::Tensor idx = tokens.to(at::kLong);
  const ForwardContext f{is_training(), config_.dropout, generator};
  auto& t = *transformer_;
  at::Tensor x = t.wte->forward(idx) + t.wpe->forward(at::arange(T, idx.options()));
  x = sdk::dropout(x, f.dropout, f.training, f.generator);
  for (const auto& block : *t.h) x = block->as<Block>()->forward(x, future, f);
  return t.ln_f->forward(x);
}

at::Tensor Gpt::future_mask(int64_t T, const c10::Device& device) {
  if (T > config_.block_size) {
    throw sdk::ConfigError("block_size", "sequences of " + std::to_string(T) + " tokens are longer than the " +
                                             "model's block_size " + std::to_string(config_.block_size) +
                                             "; set it to at least the dataset's block_size");
  }
  if (future_.device() != device) future_ = future_.to(device);
  return future_.narrow(0, 0, T).narrow(1, 0, T);
}

at::Tensor Gpt::head(const at::Tensor& x) const { return at::linear(x, transformer_->wte->weight); }

const at::Tensor& Gpt::head_weight() const { return transformer_->wte->weight; }

}  // namespace exogym::models::nanogpt
