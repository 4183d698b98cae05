// The nanoGPT model: its size, initialisation, causal attention, tied head,
// learning, dropout and input checks.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/randint.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "exogym/sdk/model.h"
#include "exogym/sdk/optim.h"
#include "helpers.h"
#include "lm_fixtures.h"
#include "nanogpt/gpt.h"
#include "testing.h"

using exogym::models::nanogpt::Gpt;
using exogym::models::nanogpt::GptConfig;
using exogym::test::error_of;
using nlohmann::json;

namespace {

// The nanogpt plugin, through the runtime's loader, initialised as the
// runtime initialises node 0.
std::shared_ptr<exogym::sdk::Model> make_nanogpt(const json& options, uint64_t seed = 0) {
  auto plugin = exogym::test::test_loader().load("model", "nanogpt", "model.plugin");
  auto model = plugin->create_model(plugin->validate(options, "model.options"));
  model->init_parameters();
  model->set_generator(at::make_generator<at::CPUGeneratorImpl>(seed));
  return model;
}

int64_t module_parameters(torch::nn::Module& module) {
  int64_t count = 0;
  for (const auto& p : module.parameters()) count += p.numel();
  return count;
}

// The reference's formula V·C + T·C + L·(12C² + 13C) + 2C (with biases).
int64_t gpt_parameters(int64_t V, int64_t T, int64_t L, int64_t C) {
  return V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
}

GptConfig tiny_config() {
  GptConfig c;
  c.n_layer = 2, c.n_head = 4, c.n_embd = 32, c.block_size = 16, c.vocab_size = 20;
  return c;
}

}  // namespace

TEST_CASE("nanogpt: small with V=66 and block 1024 has 932,864 parameters, the tied head counted once",
          "[lm][models]") {
  auto model = make_nanogpt(json::object());
  CHECK(module_parameters(model->network()) == 932864);
  CHECK(gpt_parameters(66, 1024, 4, 128) == 932864);
  const auto named = model->network().named_parameters();
  CHECK(named.contains("transformer.wte.weight"));
  CHECK(named.contains("transformer.wpe.weight"));
  CHECK(named.contains("transformer.h.3.attn.c_attn.weight"));
  CHECK(named.contains("transformer.h.3.mlp.c_proj.bias"));
  CHECK(named.contains("transformer.ln_f.weight"));
  CHECK_FALSE(named.contains("transformer.h.4.ln_1.weight"));
  for (const auto& item : named) CHECK(item.key().find("lm_head") == std::string::npos);
  CHECK(named["transformer.wte.weight"].sizes() == at::IntArrayRef({66, 128}));
  CHECK(named["transformer.wpe.weight"].sizes() == at::IntArrayRef({1024, 128}));

  // Presets, and explicit options over them.
  CHECK(module_parameters(make_nanogpt({{"size", "sbase"}, {"block_size", 64}})->network()) ==
        gpt_parameters(66, 64, 8, 512));
  CHECK(module_parameters(make_nanogpt({{"size", "base"}, {"n_layer", 1}, {"vocab_size", 100}})->network()) ==
        gpt_parameters(100, 1024, 1, 768));
  CHECK(
      module_parameters(make_nanogpt({{"n_layer", 2}, {"n_head", 2}, {"n_embd", 64}, {"block_size", 32}})->network()) ==
      gpt_parameters(66, 32, 2, 64));
  // Without biases: LayerNorms keep only their weights (L·2C + C), linears lose theirs.
  CHECK(module_parameters(make_nanogpt({{"bias", false}, {"block_size", 32}})->network()) ==
        66 * 128 + 32 * 128 + 4 * (12 * 128 * 128 + 2 * 128) + 128);

  CHECK(error_of([] {
          make_nanogpt({{"n_embd", 100}, {"n_head", 3}});
        }) == "n_embd: n_embd = 100 is not divisible by n_head = 3 (each head attends in n_embd / n_head dimensions)");
  CHECK_THAT(error_of([] {
               make_nanogpt({{"n_head", 3}});
             }),
             Catch::StartsWith("n_head: n_embd = 128 is not divisible by n_head = 3"));
  CHECK_THAT(error_of([] {
               make_nanogpt({{"size", "huge"}});
             }),
             Catch::StartsWith("model.options.size: expected one of"));
  CHECK_THAT(error_of([] { make_nanogpt({{"dropout", 1.0}}); }), Catch::StartsWith("dropout: expected a probability"));
}

TEST_CASE("nanogpt: the reference's initialisation, c_proj scaled by 1/sqrt(2 n_layer)", "[lm][models]") {
  at::manual_seed(3);
  auto model = make_nanogpt({{"block_size", 256}});
  auto named = model->network().named_parameters();
  const auto std_of = [&](const std::string& name) { return named[name].std().item<double>(); };
  const double proj = 0.02 / std::sqrt(8.0);
  CHECK(std_of("transformer.h.0.attn.c_proj.weight") == Approx(proj).epsilon(0.05));
  CHECK(std_of("transformer.h.2.mlp.c_proj.weight") == Approx(proj).epsilon(0.05));
  CHECK(std_of("transformer.h.1.attn.c_attn.weight") == Approx(0.02).epsilon(0.05));
  CHECK(std_of("transformer.h.3.mlp.c_fc.weight") == Approx(0.02).epsilon(0.05));
  CHECK(std_of("transformer.wte.weight") == Approx(0.02).epsilon(0.1));
  CHECK(std_of("transformer.wpe.weight") == Approx(0.02).epsilon(0.05));
  CHECK(named["transformer.h.0.attn.c_attn.bias"].abs().max().item<double>() == 0.0);
  CHECK(named["transformer.h.0.mlp.c_proj.bias"].abs().max().item<double>() == 0.0);
  CHECK(named["transformer.h.0.ln_1.weight"].eq(1).all().item<bool>());
  CHECK(named["transformer.ln_f.bias"].eq(0).all().item<bool>());
}

TEST_CASE("nanogpt: attention is causal, changing token j changes the logits from position j on only", "[lm][models]") {
  at::manual_seed(1);
  Gpt gpt(tiny_config());
  auto generator = at::make_generator<at::CPUGeneratorImpl>(0);
  auto token_generator = at::make_generator<at::CPUGeneratorImpl>(9);
  const at::Tensor x = at::randint(0, 20, {3, 16}, token_generator, at::TensorOptions().dtype(at::kLong));
  at::NoGradGuard no_grad;
  for (const bool training : {false, true}) {  // dropout 0: train mode computes the same
    gpt.train(training);
    const at::Tensor base = gpt.logits(x, generator);
    REQUIRE(base.sizes() == at::IntArrayRef({3, 16, 20}));
    for (const int64_t j : {1, 6, 15}) {
      INFO("training " << training << ", changed position " << j);
      at::Tensor changed = x.clone();
      changed.select(1, j).add_(1).remainder_(20);
      const at::Tensor diff = (gpt.logits(changed, generator) - base).abs().amax({0, 2});  // per position
      for (int64_t p = 0; p < 16; ++p) {
        INFO("position " << p);
        if (p < j) {
          CHECK(diff[p].item<double>() <= 1e-6);
        } else {
          CHECK(diff[p].item<double>() > 1e-4);
        }
      }
    }
  }
  // Position t of a full sequence = the last position of its prefix.
  gpt.eval();
  const at::Tensor full = gpt.logits(x, generator);
  for (const int64_t t : {0, 4, 15}) {
    const at::Tensor prefix = gpt.logits(x.narrow(1, 0, t + 1), generator).select(1, t);
    CHECK((prefix - full.select(1, t)).abs().max().item<double>() < 1e-5);
  }
}

TEST_CASE("nanogpt: the LM head is the token embedding, one tensor that one update moves", "[lm][models]") {
  Gpt gpt(tiny_config());
  const auto named = gpt.named_parameters();
  CHECK(gpt.head_weight().is_same(named["transformer.wte.weight"]));
  // No tensor is listed twice (an optimizer would step it twice).
  std::set<const void*> impls;
  for (const auto& p : gpt.parameters()) impls.insert(p.unsafeGetTensorImpl());
  CHECK(impls.size() == gpt.parameters().size());

  // Through the plugin: tokens 0-4 only, in and out. Rows 5-19 of wte get
  // gradients only through the head (the softmax pushes them down), so
  // they would stay zero if the head had a weight of its own.
  auto model = make_nanogpt({{"n_layer", 1}, {"n_head", 2}, {"n_embd", 16}, {"block_size", 8}, {"vocab_size", 20}});
  auto wte = model->network().named_parameters()["transformer.wte.weight"];
  auto generator = at::make_generator<at::CPUGeneratorImpl>(2);
  const auto ids = [&] { return at::randint(0, 5, {4, 8}, generator, at::TensorOptions().dtype(at::kLong)); };
  const exogym::sdk::Batch batch = {{"input", ids()}, {"target", ids()}};
  std::vector<at::Tensor> params = model->network().parameters();
  auto optimizer = exogym::sdk::OptimizerSpec::from_json({{"name", "sgd"}, {"lr", 0.5}}, "o").build(params);
  const at::Tensor before = wte.detach().clone();
  optimizer->zero_grad();
  model->loss(batch).backward();
  REQUIRE(wte.grad().defined());
  CHECK(wte.grad().narrow(0, 5, 15).abs().min().item<double>() > 0.0);
  optimizer->step();
  CHECK((wte.detach() - before).narrow(0, 5, 15).abs().min().item<double>() > 0.0);
  // The next-token logits use the updated rows: they equal the hidden state times the new wte.
  at::NoGradGuard no_grad;
  model->network().eval();
  const at::Tensor logits = model->next_token_logits(batch.at("input"));
  CHECK(logits.sizes() == at::IntArrayRef({4, 20}));
  const at::Tensor old_head = at::linear(at::zeros({1, 16}) + 1.0, before);
  const at::Tensor new_head = at::linear(at::zeros({1, 16}) + 1.0, wte);
  CHECK((old_head - new_head).abs().max().item<double>() > 0.0);
}

TEST_CASE("nanogpt: learns, draws dropout from the model's generator, checks its input", "[lm][models]") {
  at::set_num_threads(1);
  auto model = make_nanogpt(
      {{"n_layer", 1}, {"n_head", 2}, {"n_embd", 32}, {"block_size", 8}, {"vocab_size", 10}, {"dropout", 0.2}});
  auto generator = at::make_generator<at::CPUGeneratorImpl>(4);
  // A learnable rule: each token is the previous one plus 1 (mod 10).
  const at::Tensor start = at::randint(0, 10, {16, 1}, generator, at::TensorOptions().dtype(at::kLong));
  const at::Tensor seq = (start + at::arange(9, at::kLong)).remainder(10);
  const exogym::sdk::Batch batch = {{"input", seq.narrow(1, 0, 8)}, {"target", seq.narrow(1, 1, 8)}};

  {
    at::NoGradGuard no_grad;
    model->network().train();
    model->set_generator(at::make_generator<at::CPUGeneratorImpl>(11));
    const float a = model->loss(batch).item<float>();
    model->set_generator(at::make_generator<at::CPUGeneratorImpl>(11));
    const float b = model->loss(batch).item<float>();
    model->set_generator(at::make_generator<at::CPUGeneratorImpl>(12));
    const float c = model->loss(batch).item<float>();
    CHECK(a == b);
    CHECK(a != c);
    model->network().eval();
    const float e1 = model->loss(batch).item<float>();
    model->set_generator(at::make_generator<at::CPUGeneratorImpl>(13));
    CHECK(model->loss(batch).item<float>() == e1);
    CHECK(std::abs(e1 - std::log(10.0f)) < 0.5f);  // untrained: about uniform
  }

  model->network().train();
  std::vector<at::Tensor> params = model->network().parameters();
  auto optimizer = exogym::sdk::OptimizerSpec::from_json({{"name", "adamw"}, {"lr", 1e-2}}, "o").build(params);
  for (int step = 0; step < 60; ++step) {
    optimizer->zero_grad();
    model->loss(batch).backward();
    optimizer->step();
  }
  at::NoGradGuard no_grad;
  model->network().eval();
  CHECK(model->evaluate(batch).loss.item<double>() < 0.5);

  CHECK_THAT(error_of([&] {
               model->loss({{"input", batch.at("input") + 10}, {"target", batch.at("target")}});
             }),
             Catch::StartsWith("vocab_size: the batch's \"input\" holds token id 1") &&
                 Catch::Contains("outside the model's vocabulary of 10 tokens"));
  const at::Tensor long_seq = at::zeros({2, 9}, at::kLong);
  CHECK_THAT(error_of([&] {
               model->loss({{"input", long_seq}, {"target", long_seq}});
             }),
             Catch::StartsWith("block_size: sequences of 9 tokens are longer than the model's block_size 8"));
  CHECK_THAT(error_of([&] {
               model->loss({{"input", at::zeros({2, 4})}, {"target", at::zeros({2, 4})}});
             }),
             Catch::Contains("floating-point"));
  CHECK_THAT(error_of([&] { model->loss({{"input", seq.narrow(1, 0, 8)}}); }), Catch::Contains("no \"target\""));
  // The context is cropped to block_size for generation.
  CHECK(model->next_token_logits(at::zeros({1, 30}, at::kLong)).sizes() == at::IntArrayRef({1, 10}));
  CHECK(model->next_token_logits(at::zeros({1, 30}, at::kLong))
            .equal(model->next_token_logits(at::zeros({1, 8}, at::kLong))));
}
