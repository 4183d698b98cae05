// "nanogpt": a GPT-2-style decoder (the reference's nanoGPT clone, see
// gpt.h). The batch's "input" and "target" are int64 [B, T] token ids (the
// text-char and tokens datasets); the loss is the mean cross-entropy over all
// B·T positions, and next_token_logits() serves exogym-generate.
//
// Parameter names follow nanoGPT (transformer.wte.weight,
// transformer.h.0.attn.c_attn.weight, ...), so model.pt loads into nanoGPT's
// Python GPT. The head has no parameter of its own: it multiplies by
// transformer.wte.weight, which is therefore one tensor, counted, optimized
// and communicated once. (nanoGPT's state_dict lists it a second time as
// lm_head.weight: load model.pt there with strict=False.)
#include <ATen/ops/cross_entropy_loss.h>

#include <memory>
#include <string>

#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/stacked.h"
#include "gpt.h"

namespace exogym::models {

namespace {

using nanogpt::Gpt;

class NanoGpt : public sdk::Model {
 public:
  explicit NanoGpt(const nlohmann::json& options)
      : net_(std::make_shared<Gpt>(nanogpt::config_from_options(options))) {}

  torch::nn::Module& network() override { return *net_; }

  // The token embedding (also the output head: tied) and the positions'
  // embedding, which Muon's reference steps with AdamW.
  std::vector<std::string> embedding_and_head_parameters() const override {
    return {"transformer.wte.weight", "transformer.wpe.weight"};
  }

  void init_parameters() override { net_->init_parameters(); }

  at::Tensor loss(const sdk::Batch& batch) override {
    const at::Tensor& input = sdk::batch_tensor(batch, "input");
    const at::Tensor& target = sdk::batch_tensor(batch, "target");
    check_batch(input, target);
    const at::Tensor logits = net_->logits(input, generator());
    return at::cross_entropy_loss(logits.reshape({-1, net_->config().vocab_size}), target.reshape({-1}).to(at::kLong));
  }

  bool supports_stacking() const override { return true; }

  at::Tensor stacked_loss(const sdk::Stack& stack, const sdk::Batch& batch) override {
    const at::Tensor& input = sdk::batch_tensor(batch, "input");
    const at::Tensor& target = sdk::batch_tensor(batch, "target");
    check_batch(input, target);
    return sdk::stacked_cross_entropy(net_->stacked_head(stack, net_->stacked_hidden(stack, input)), target);
  }

  at::Tensor next_token_logits(const at::Tensor& tokens) override {
    if (tokens.dim() != 2 || tokens.size(1) == 0) {
      throw sdk::Error("nanogpt: next_token_logits expects [B, T] token ids with T >= 1, got " + sdk::shape_of(tokens));
    }
    check_ids(tokens, "input");
    // As nanoGPT's generate(): the context is cropped to its last block_size tokens.
    const int64_t T = tokens.size(1), block = net_->config().block_size;
    const at::Tensor context = T > block ? tokens.narrow(1, T - block, block) : tokens;
    const at::Tensor x = net_->hidden(context, generator());
    return net_->head(x.select(1, x.size(1) - 1));  // only the last position is needed
  }

 private:
  void check_batch(const at::Tensor& input, const at::Tensor& target) const {
    if (target.sizes() != input.sizes()) {
      throw sdk::Error("nanogpt: the batch's \"target\" has shape " + sdk::shape_of(target) + " and \"input\" " +
                       sdk::shape_of(input) + "; expected one target token per input token");
    }
    check_ids(input, "input");
    check_ids(target, "target");
  }

  // An id outside the vocabulary would fail deep inside the embedding (or
  // assert on a GPU); say which option to fix instead.
  void check_ids(const at::Tensor& ids, const char* key) const {
    if (at::isFloatingType(ids.scalar_type())) {
      throw sdk::Error(std::string("nanogpt: the batch's \"") + key +
                       "\" holds floating-point values; expected integer token ids (a text dataset: text-char "
                       "or tokens)");
    }
    if (ids.numel() == 0) return;
    const int64_t low = ids.min().item<int64_t>(), high = ids.max().item<int64_t>();
    const int64_t vocab = net_->config().vocab_size;
    if (low < 0 || high >= vocab) {
      throw sdk::ConfigError("vocab_size", std::string("the batch's \"") + key + "\" holds token id " +
                                               std::to_string(low < 0 ? low : high) +
                                               ", outside the model's vocabulary of " + std::to_string(vocab) +
                                               " tokens; set vocab_size to the dataset's");
    }
  }

  std::shared_ptr<Gpt> net_;
};

}  // namespace

}  // namespace exogym::models

EXOGYM_MODEL_PLUGIN("nanogpt", "1.0.0", exogym::models::NanoGpt, exogym::models::nanogpt::option_specs)
