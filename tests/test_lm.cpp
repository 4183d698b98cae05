// Language modelling: the nanogpt model, the text-char and tokens datasets,
// the contiguous partition, token accounting and text generation.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/randint.h>
#include <sys/wait.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "nanogpt/gpt.h"
#include "exogym/runtime/data/char_vocabulary.h"
#include "exogym/runtime/data/contiguous_sampler.h"
#include "exogym/runtime/data/registry.h"
#include "exogym/runtime/data/sampler.h"
#include "exogym/runtime/data/text_char.h"
#include "exogym/runtime/data/tokens.h"
#include "exogym/runtime/lm/text_generator.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/optim.h"
#include "helpers.h"

namespace fs = std::filesystem;
using exogym::models::nanogpt::Gpt;
using exogym::models::nanogpt::GptConfig;
using exogym::runtime::data::CharVocabulary;
using exogym::runtime::data::ContiguousSampler;
using exogym::runtime::data::TextCharDataset;
using exogym::runtime::data::TextCharOptions;
using exogym::runtime::data::TokensDataset;
using exogym::runtime::data::TokensOptions;
using exogym::sdk::ConfigError;
using exogym::sdk::DataError;
using exogym::test::TempDir;
using nlohmann::json;

namespace {

fs::path shakespeare() { return fs::path(EXOGYM_SOURCE_DIR) / "examples" / "data" / "shakespeare" / "input.txt"; }

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary);
  out << text;
}

void write_tokens(const fs::path& file, const std::vector<uint16_t>& tokens) {
  std::ofstream out(file, std::ios::binary);
  for (const uint16_t t : tokens) {
    const char bytes[2] = {static_cast<char>(t & 0xFF), static_cast<char>(t >> 8)};  // little-endian, as numpy
    out.write(bytes, 2);
  }
}

std::vector<int64_t> to_vector(const at::Tensor& tensor) {
  const at::Tensor t = tensor.to(at::kLong).contiguous();
  return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()};
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

// The nanogpt plugin, through the runtime's loader, initialised as the
// runtime initialises node 0.
std::shared_ptr<exogym::sdk::Model> make_nanogpt(const json& options, uint64_t seed = 0) {
  auto plugin = exogym::test::test_loader().load("model", "nanogpt", "model.plugin");
  auto model = plugin->create_model(plugin->validate(options, "model.options"));
  model->init_parameters();
  model->set_generator(at::make_generator<at::CPUGeneratorImpl>(seed));
  return model;
}

int64_t parameter_count(torch::nn::Module& module) {
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

// A tiny character model on Shakespeare, for runs that must be quick.
json text_manifest(int nodes, int64_t steps) {
  const std::string text = shakespeare().string();
  return {
      {"name", "lm"},
      {"seed", 5},
      {"nodes", nodes},
      {"threads", 1},
      {"model",
       {{"plugin", "nanogpt"}, {"options", {{"n_layer", 1}, {"n_head", 2}, {"n_embd", 32}, {"block_size", 16}}}}},
      {"strategy", {{"plugin", "allreduce"}, {"options", {{"optimizer", {{"name", "adamw"}, {"lr", 3e-3}}}}}}},
      {"data",
       {{"train", {{"dataset", "text-char"}, {"path", text}, {"options", {{"block_size", 16}}}}},
        {"val", {{"dataset", "text-char"}, {"path", text}, {"split", "val"}, {"options", {{"block_size", 16}}}}}}},
      {"train", {{"max_steps", steps}, {"batch_size", 8}}},
      {"eval", {{"interval", 0}, {"size", 64}}},
      {"output", {{"dir", "out"}}},
  };
}

}  // namespace

// ---------------------------------------------------------------------------
// nanogpt

TEST_CASE("nanogpt: small with V=66 and block 1024 has 932,864 parameters, the tied head counted once",
          "[lm][models]") {
  auto model = make_nanogpt(json::object());
  CHECK(parameter_count(model->module()) == 932864);
  CHECK(gpt_parameters(66, 1024, 4, 128) == 932864);
  const auto named = model->module().named_parameters();
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
  CHECK(parameter_count(make_nanogpt({{"size", "sbase"}, {"block_size", 64}})->module()) ==
        gpt_parameters(66, 64, 8, 512));
  CHECK(parameter_count(make_nanogpt({{"size", "base"}, {"n_layer", 1}, {"vocab_size", 100}})->module()) ==
        gpt_parameters(100, 1024, 1, 768));
  CHECK(parameter_count(make_nanogpt({{"n_layer", 2}, {"n_head", 2}, {"n_embd", 64}, {"block_size", 32}})->module()) ==
        gpt_parameters(66, 32, 2, 64));
  // Without biases: LayerNorms keep only their weights (L·2C + C), linears lose theirs.
  CHECK(parameter_count(make_nanogpt({{"bias", false}, {"block_size", 32}})->module()) ==
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
  auto named = model->module().named_parameters();
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
  auto wte = model->module().named_parameters()["transformer.wte.weight"];
  auto generator = at::make_generator<at::CPUGeneratorImpl>(2);
  const auto ids = [&] { return at::randint(0, 5, {4, 8}, generator, at::TensorOptions().dtype(at::kLong)); };
  const exogym::sdk::Batch batch = {{"input", ids()}, {"target", ids()}};
  std::vector<at::Tensor> params = model->module().parameters();
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
  model->module().eval();
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
    model->module().train();
    model->set_generator(at::make_generator<at::CPUGeneratorImpl>(11));
    const float a = model->loss(batch).item<float>();
    model->set_generator(at::make_generator<at::CPUGeneratorImpl>(11));
    const float b = model->loss(batch).item<float>();
    model->set_generator(at::make_generator<at::CPUGeneratorImpl>(12));
    const float c = model->loss(batch).item<float>();
    CHECK(a == b);
    CHECK(a != c);
    model->module().eval();
    const float e1 = model->loss(batch).item<float>();
    model->set_generator(at::make_generator<at::CPUGeneratorImpl>(13));
    CHECK(model->loss(batch).item<float>() == e1);
    CHECK(std::abs(e1 - std::log(10.0f)) < 0.5f);  // untrained: about uniform
  }

  model->module().train();
  std::vector<at::Tensor> params = model->module().parameters();
  auto optimizer = exogym::sdk::OptimizerSpec::from_json({{"name", "adamw"}, {"lr", 1e-2}}, "o").build(params);
  for (int step = 0; step < 60; ++step) {
    optimizer->zero_grad();
    model->loss(batch).backward();
    optimizer->step();
  }
  at::NoGradGuard no_grad;
  model->module().eval();
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

// ---------------------------------------------------------------------------
// text-char

TEST_CASE("text-char: the reference vocabulary round-trips text", "[lm][data]") {
  const CharVocabulary v = CharVocabulary::reference();
  REQUIRE(v.size() == 66);
  CHECK(v.eos() == 65);
  CHECK(v.id(U' ') == 0);
  CHECK(v.id(U'?') == 11);
  CHECK(v.id(U'A') == 12);
  CHECK(v.id(U'a') == 38);
  CHECK(v.id(U'\n') == 64);
  CHECK_FALSE(v.id(U'#').has_value());
  const std::string text = "To be, or not to be: that is the question.\nWhither, O Romeo?! 3 $&'-;";
  const auto ids = v.encode(text, "t");
  CHECK(ids.size() == text.size());
  CHECK(v.decode(ids) == text);
  CHECK(v.token_text(65).empty());  // EOS decodes to nothing
  CHECK(v.decode({12, 65, 38}) == "Aa");
  CHECK_THROWS_AS(v.token_text(66), std::out_of_range);

  // Every character of the bundled Shakespeare is in it.
  const std::string all = read_text(shakespeare());
  CHECK(v.decode(v.encode(all, "input.txt")) == all);

  CHECK(error_of([&] { v.encode("ab\ncd#e", "my.txt"); }) ==
        "my.txt: character '#' (U+0023) at byte offset 5 (line 2, column 3) is not in the vocabulary (65 characters)");
}

TEST_CASE("text-char: a vocabulary derived from the file, UTF-8 included", "[lm][data]") {
  const std::string text = "héllo wörld\nßé\n";
  const CharVocabulary v = CharVocabulary::from_text(text, "f.txt");
  // Sorted by code point: \n, ' ', d, h, l, o, r, w, ß, é, ö; then EOS.
  CHECK(v.size() == 12);
  CHECK(v.characters() == std::u32string(U"\n dhlorwßéö"));
  CHECK(v.id(U'é') == 9);
  CHECK(v.decode(v.encode(text, "f.txt")) == text);
  CHECK(v.token_text(9) == "é");
  CHECK(v.token_text(11).empty());  // EOS
  CHECK(v.encode("ö", "p").size() == 1);

  CHECK_THAT(error_of([] { CharVocabulary::from_text(std::string("ab\xff"), "bad.txt"); }),
             Catch::StartsWith("bad.txt: invalid UTF-8 (byte 0xFF) at byte offset 2 (line 1, column 3)"));
  CHECK_THAT(error_of([&] { v.encode("hé!", "the prompt"); }),
             Catch::StartsWith("the prompt: character '!' (U+0021) at byte offset 3 (line 1, column 3)"));

  TempDir dir("lm-vocab");
  write_text(dir / "f.txt", text + text + text);
  TextCharOptions options;
  options.block_size = 4;
  options.vocabulary = "file";
  options.val_fraction = 0.5;
  const TextCharDataset ds(dir / "f.txt", "train", options);
  CHECK(ds.vocabulary().characters() == v.characters());
  CHECK(TextCharDataset::vocabulary_for(dir / "f.txt", "file").characters() == v.characters());
  CHECK(TextCharDataset::vocabulary_for(dir / "f.txt", "reference").size() == 66);
  // The reference vocabulary refuses the file, naming the character and where it is.
  options.vocabulary = "reference";
  CHECK(error_of([&] { TextCharDataset(dir / "f.txt", "train", options); }) ==
        (dir / "f.txt").string() +
            ": character 'é' (U+00E9) at byte offset 1 (line 1, column 2) is not in the vocabulary (65 "
            "characters); set the dataset option \"vocabulary\": \"file\" to use the file's own characters");
}

TEST_CASE("text-char: windows of block_size, input and target shifted by one, split by val_fraction", "[lm][data]") {
  TempDir dir("lm-text");
  std::string text;
  for (int i = 0; i < 10; ++i) text += "abcdefghij";  // 100 characters, + EOS = 101 tokens
  write_text(dir / "t.txt", text);
  TextCharOptions options;
  options.block_size = 8;
  options.val_fraction = 0.2;
  const TextCharDataset train(dir / "t.txt", "train", options);
  const TextCharDataset val(dir / "t.txt", "val", options);
  const TextCharDataset test(dir / "t.txt", "test", options);
  // floor(101 · 0.8) = 80 training tokens, 21 validation tokens.
  CHECK(train.tokens().numel() == 80);
  CHECK(val.tokens().numel() == 21);
  CHECK(val.tokens().equal(test.tokens()));
  CHECK(train.size() == 80 - 8);
  CHECK(val.size() == 21 - 8);
  CHECK(train.tokens_per_example() == 8);
  CHECK(to_vector(val.tokens()).back() == 65);  // EOS ends the text
  const CharVocabulary v = CharVocabulary::reference();
  CHECK(v.decode(to_vector(val.tokens())) == text.substr(80));

  const auto batch = train.get({0, 3, 71});
  REQUIRE(batch.at("input").sizes() == at::IntArrayRef({3, 8}));
  REQUIRE(batch.at("target").sizes() == at::IntArrayRef({3, 8}));
  CHECK(batch.at("input").scalar_type() == at::kLong);
  CHECK(v.decode(to_vector(batch.at("input")[0])) == "abcdefgh");
  CHECK(v.decode(to_vector(batch.at("target")[0])) == "bcdefghi");
  CHECK(v.decode(to_vector(batch.at("input")[1])) == "defghija");
  CHECK(v.decode(to_vector(batch.at("target")[2])) == text.substr(72, 8));
  CHECK_THROWS_AS(train.get({72}), std::out_of_range);

  options.stride = 4;
  const TextCharDataset strided(dir / "t.txt", "train", options);
  CHECK(strided.size() == (80 - 8 - 1) / 4 + 1);
  CHECK(v.decode(to_vector(strided.get({2}).at("input")[0])) == "ijabcdef");

  // The bundled Shakespeare, as the reference splits it (90 % / 10 %).
  TextCharOptions reference;
  reference.block_size = 128;
  const TextCharDataset shakespeare_train(shakespeare(), "train", reference);
  CHECK(shakespeare_train.tokens().numel() == 1003855);  // floor(1,115,395 · 0.9)
  CHECK(shakespeare_train.size() == 1003855 - 128);
  CHECK(v.decode(to_vector(shakespeare_train.get({0}).at("input")[0])).rfind("First Citizen:\nBefore we proceed", 0) ==
        0);
}

TEST_CASE("text-char: errors name the file and the problem", "[lm][data]") {
  TempDir dir("lm-text-errors");
  TextCharOptions options;
  options.block_size = 8;
  CHECK(error_of([&] { TextCharDataset(dir / "missing.txt", "train", options); }) ==
        (dir / "missing.txt").string() + ": no such file");
  CHECK_THAT(error_of([&] { TextCharDataset(dir.path(), "train", options); }), Catch::Contains("is a folder"));
  write_text(dir / "short.txt", "abcdefghijklmnopqrst");  // 21 tokens: val gets 3
  CHECK(error_of([&] { TextCharDataset(dir / "short.txt", "val", options); }) ==
        (dir / "short.txt").string() +
            ": split \"val\" has 3 tokens (of 21, val_fraction 0.100000), fewer than block_size + 1 = 9; lower "
            "block_size or use a longer text");
  CHECK_THROWS_AS(TextCharDataset(dir / "short.txt", "validation", options), ConfigError);

  // Through a run: the error names the manifest field.
  json m = text_manifest(1, 2);
  m["data"]["val"]["path"] = (dir / "short.txt").string();
  m["data"]["val"]["options"]["block_size"] = 16;
  CHECK_THAT(error_of([&] { exogym::test::run_json(m, dir.path()); }),
             Catch::StartsWith("data.val.path: " + (dir / "short.txt").string() + ": split \"val\" has 3 tokens"));
  m = text_manifest(1, 2);
  m["data"]["val"]["split"] = "dev";
  CHECK_THAT(error_of([&] { exogym::test::run_json(m, dir.path()); }),
             Catch::StartsWith("data.val.split: text-char has the splits"));
}

// ---------------------------------------------------------------------------
// tokens

TEST_CASE("tokens: memory-maps a uint16 file and reads windows", "[lm][data]") {
  TempDir dir("lm-tokens");
  std::vector<uint16_t> train(1000), val(300);
  for (size_t i = 0; i < train.size(); ++i) train[i] = static_cast<uint16_t>((i * 37) % 50257);
  for (size_t i = 0; i < val.size(); ++i) val[i] = static_cast<uint16_t>(65535 - i % 7 - 1000 * (i % 3));
  write_tokens(dir / "train.bin", train);
  write_tokens(dir / "val.bin", val);

  TokensOptions options;
  options.block_size = 16;
  const TokensDataset ds(dir.path(), "train", options);
  CHECK(ds.file() == dir / "train.bin");
  CHECK(ds.num_tokens() == 1000);
  CHECK(ds.size() == (1000 - 16 - 1) / 16 + 1);  // non-overlapping windows by default
  CHECK(ds.tokens_per_example() == 16);
  const auto batch = ds.get({0, 61, 2});
  REQUIRE(batch.at("input").sizes() == at::IntArrayRef({3, 16}));
  CHECK(batch.at("input").scalar_type() == at::kLong);
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t start = std::vector<int64_t>{0, 61, 2}[b] * 16;
    for (int64_t t = 0; t < 16; ++t) {
      CHECK(batch.at("input")[b][t].item<int64_t>() == train[start + t]);
      CHECK(batch.at("target")[b][t].item<int64_t>() == train[start + t + 1]);
    }
  }
  CHECK_THROWS_AS(ds.get({62}), std::out_of_range);

  options.stride = 1;  // every position, as nanoGPT's get_batch draws
  const TokensDataset every(dir / "train.bin", "ignored for a file", options);
  CHECK(every.size() == 1000 - 16);
  CHECK(every.get({983}).at("target")[0][15].item<int64_t>() == train[999]);

  // "test" reads val.bin when there is no test.bin; ids up to 65535 pass with the check off.
  options.vocab_size = std::nullopt;
  options.stride = std::nullopt;
  const TokensDataset test(dir.path(), "test", options);
  CHECK(test.file() == dir / "val.bin");
  CHECK(test.token(0) == 65535);
  CHECK(test.get({1}).at("input")[0][0].item<int64_t>() == val[16]);
  CHECK(test.get({1}).at("input")[0][1].item<int64_t>() == val[17]);

  // Through the registry, the runtime shares one object between all nodes.
  exogym::sdk::DatasetRequest request;
  request.path = dir.path();
  request.split = "train";
  const auto built = exogym::runtime::data::make_builtin_dataset(
      "tokens", {{"block_size", 16}, {"vocab_size", 50257}, {"stride", nullptr}}, request);
  REQUIRE(built != nullptr);
  CHECK(built->size() == ds.size());
  CHECK(built->tokens_per_example() == 16);
}

TEST_CASE("tokens: a corrupt, short or out-of-vocabulary file is a clear error naming it", "[lm][data]") {
  TempDir dir("lm-tokens-errors");
  TokensOptions options;
  options.block_size = 8;
  {
    std::ofstream odd(dir / "odd.bin", std::ios::binary);
    odd << "abcdefghijklmnopqrstu";  // 21 bytes
  }
  CHECK(error_of([&] { TokensDataset(dir / "odd.bin", "train", options); }) ==
        (dir / "odd.bin").string() + ": 21 bytes, an odd number: not a file of uint16 tokens (corrupt or truncated?)");
  write_tokens(dir / "short.bin", {1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(error_of([&] { TokensDataset(dir / "short.bin", "train", options); }) ==
        (dir / "short.bin").string() +
            ": 8 tokens, fewer than block_size + 1 = 9 (one example needs its input and one more target)");
  write_tokens(dir / "empty.bin", {});
  CHECK_THAT(error_of([&] { TokensDataset(dir / "empty.bin", "train", options); }),
             Catch::Contains("0 tokens, fewer than block_size + 1"));
  CHECK(error_of([&] { TokensDataset(dir / "nothing.bin", "train", options); }) ==
        (dir / "nothing.bin").string() + ": no such file or folder");
  CHECK(error_of([&] { TokensDataset(dir.path(), "train", options); }) ==
        dir.path().string() +
            ": no train.bin for split \"train\" (the folder has empty.bin, odd.bin, short.bin); nanoGPT's prepare "
            "scripts write train.bin and val.bin");

  // Ids are checked lazily, as windows are read.
  std::vector<uint16_t> tokens(40, 7);
  tokens[21] = 50300;
  write_tokens(dir / "big.bin", tokens);
  const TokensDataset big(dir / "big.bin", "train", options);
  CHECK_NOTHROW(big.get({0, 1}));
  CHECK(error_of([&] { big.get({2}); }) ==
        (dir / "big.bin").string() +
            ": token id 50300 at token offset 21 is not below vocab_size 50257 (set the dataset option "
            "\"vocab_size\" to the tokenizer's vocabulary size)");
}

// ---------------------------------------------------------------------------
// contiguous partition

TEST_CASE("contiguous partition: node r stays inside its slice rN/K to (r+1)N/K and together the nodes cover the range",
          "[lm][data]") {
  SECTION("even slices: every epoch covers the whole range") {
    const ContiguousSampler sampler(100, 4, 5, 42);
    CHECK(sampler.steps_per_epoch() == 5);
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      std::vector<int64_t> seen;
      std::vector<std::vector<int64_t>> orders(4);
      for (int r = 0; r < 4; ++r) {
        for (int64_t step = epoch * 5; step < (epoch + 1) * 5; ++step) {
          for (const int64_t i : sampler.batch_indices(r, step)) {
            CHECK(i >= 25 * r);
            CHECK(i < 25 * (r + 1));
            seen.push_back(i);
            orders[r].push_back(i - 25 * r);
          }
        }
      }
      std::sort(seen.begin(), seen.end());
      std::vector<int64_t> all(100);
      for (int64_t i = 0; i < 100; ++i) all[i] = i;
      CHECK(seen == all);
      // The epoch's order is the IID sampler's permutation of the slice (seed + epoch).
      CHECK(orders[1] == exogym::runtime::data::IidSampler::permutation(25, 42, epoch));
    }
    CHECK(sampler.batch_indices(2, 0) != sampler.batch_indices(2, 5));  // reshuffled each epoch
  }
  SECTION("uneven slices: inside their slice, and every index is reached over the epochs") {
    const ContiguousSampler sampler(103, 4, 4, 7);
    CHECK(sampler.slice(0) == std::make_pair<int64_t, int64_t>(0, 25));
    CHECK(sampler.slice(1) == std::make_pair<int64_t, int64_t>(25, 51));
    CHECK(sampler.slice(3) == std::make_pair<int64_t, int64_t>(77, 103));
    CHECK(sampler.steps_per_epoch() == 6);  // the smallest slice, 25, holds 6 batches of 4
    std::set<int64_t> seen;
    for (int r = 0; r < 4; ++r) {
      const auto [begin, end] = sampler.slice(r);
      for (int64_t step = 0; step < 200; ++step) {
        for (const int64_t i : sampler.batch_indices(r, step)) {
          REQUIRE(i >= begin);
          REQUIRE(i < end);
          seen.insert(i);
        }
      }
    }
    CHECK(seen.size() == 103);
  }
  SECTION("factory and errors") {
    CHECK(dynamic_cast<ContiguousSampler*>(exogym::runtime::data::make_sampler("contiguous", 100, 4, 5, 1).get()));
    CHECK(dynamic_cast<exogym::runtime::data::IidSampler*>(
        exogym::runtime::data::make_sampler("iid", 100, 4, 5, 1).get()));
    CHECK(error_of([] { ContiguousSampler(100, 4, 26, 0); }) ==
          "train.batch_size: with \"partition\": \"contiguous\" each node owns 25 or more of the 100 training "
          "examples, fewer than batch_size = 26");
  }
}

TEST_CASE("a text-char run with the contiguous partition reports tokens trained and tokens per second",
          "[lm][training]") {
  TempDir dir("lm-run");
  json m = text_manifest(2, 6);
  m["data"]["train"]["partition"] = "contiguous";
  const auto result = exogym::test::run_json(m, dir.path());
  REQUIRE(result.final_eval.has_value());
  const json summary = json::parse(read_text(dir / "run" / "summary.json"));
  CHECK(summary["examples_trained"] == 6 * 8 * 2);
  CHECK(summary["tokens_trained"] == 6 * 8 * 2 * 16);
  CHECK(summary["tokens_per_second"].get<double>() > 0);
  CHECK(summary["tokens_per_second"].get<double>() ==
        Approx(6 * 8 * 2 * 16 / summary["wall_seconds"].get<double>()).epsilon(1e-9));
  const json config = json::parse(read_text(dir / "run" / "config.json"));
  CHECK(config["data"]["train"]["partition"] == "contiguous");
  CHECK(config["data"]["train"]["options"]["vocabulary"] == "reference");
  CHECK(fs::path(config["data"]["train"]["path"].get<std::string>()).is_absolute());
  // Validation loss and perplexity of a character model.
  const double loss = summary["final"]["global_loss"].get<double>();
  CHECK(loss < std::log(66.0));
  CHECK(summary["final"]["global_perplexity"].get<double>() == Approx(std::exp(loss)));

  // Not a token dataset: no token counts.
  TempDir other("lm-run-synthetic");
  exogym::test::run_json(exogym::test::small_manifest(1), other.path());
  CHECK_FALSE(json::parse(read_text(other / "run" / "summary.json")).contains("tokens_trained"));
}

TEST_CASE("4-node DiLoCo on Shakespeare brings the character-level validation loss below 2.5 in 300 steps",
          "[lm][slow]") {
  // About 20 s on 2 cores; it ends at 2.39. For scale: guessing uniformly
  // scores ln 66 = 4.19, the character frequencies 3.31, and the exact
  // previous-character statistics of the text 2.45.
  TempDir dir("lm-diloco");
  json m = text_manifest(4, 300);
  m["model"]["options"] = {{"n_layer", 2}, {"n_head", 4}, {"n_embd", 64}, {"block_size", 32}};
  m["data"]["train"]["options"]["block_size"] = 32;
  m["data"]["val"]["options"]["block_size"] = 32;
  m["strategy"] = {{"plugin", "diloco"},
                   {"options",
                    {{"H", 20},
                     {"optimizer", {{"name", "adamw"}, {"lr", 3e-3}}},
                     {"lr_schedule", {{"name", "cosine"}, {"warmup_steps", 15}}},
                     {"max_norm", 1.0}}}};
  m["train"]["batch_size"] = 16;
  m["eval"] = {{"interval", 100}, {"size", 512}};
  const auto result = exogym::test::run_json(m, dir.path());
  REQUIRE(result.final_eval.has_value());
  INFO("validation loss " << result.final_eval->global.loss);
  CHECK(result.final_eval->global.loss < 2.5);
  CHECK(result.final_eval->local.loss == result.final_eval->global.loss);  // step 300 is a sync step
}

// ---------------------------------------------------------------------------
// generation

namespace {

// Trains a tiny character model for a few steps into dir/run.
fs::path tiny_text_run(const fs::path& dir, const std::string& vocabulary = "reference") {
  json m = text_manifest(2, 30);
  m["data"]["train"]["options"]["vocabulary"] = vocabulary;
  m["data"]["val"]["options"]["vocabulary"] = vocabulary;
  if (vocabulary == "file") m["model"]["options"]["vocab_size"] = 66;  // 65 distinct characters + EOS
  exogym::test::run_json(m, dir);
  // train_run leaves this thread with one OpenMP thread per core, which on
  // a loaded machine makes the many small forward passes of sampling spin.
  at::set_num_threads(1);
  return dir / "run";
}

}  // namespace

TEST_CASE("generation: vocabulary characters only, the same text for the same seed, context cropped",
          "[lm][generate]") {
  TempDir dir("lm-generate");
  const fs::path run = tiny_text_run(dir.path());
  exogym::runtime::lm::TextGenerator generator(run, exogym::test::test_loader());
  const CharVocabulary& v = generator.vocabulary();
  CHECK(v.size() == 66);

  exogym::runtime::lm::SampleOptions options;
  options.max_tokens = 60;  // longer than the model's block_size 16: the context is cropped
  options.seed = 7;
  options.stop_at_eos = false;
  std::string streamed;
  const std::string a = generator.generate("ROMEO:", options, [&](const std::string& text) { streamed += text; });
  CHECK(a.size() == 60);
  CHECK(streamed == a);
  for (const char c : a) CHECK(v.id(static_cast<unsigned char>(c)).has_value());
  CHECK(generator.generate("ROMEO:", options) == a);
  options.seed = 8;
  CHECK(generator.generate("ROMEO:", options) != a);

  // top-k 1 and temperature 0 both pick the most likely character.
  options.top_k = 1;
  const std::string greedy = generator.generate("ROMEO:", options);
  options.temperature = 0;
  options.seed = 99;
  CHECK(generator.generate("ROMEO:", options) == greedy);

  CHECK_THAT(error_of([&] { generator.generate("Zoë", options); }),
             Catch::StartsWith("the prompt: character 'ë' (U+00EB) at byte offset 2 (line 1, column 3) is not in "
                               "the vocabulary"));
  options.max_tokens = 5;
  CHECK(generator.generate("", options).size() == 5);  // an empty prompt starts from EOS

  // A file-derived vocabulary is rebuilt from the text file named in config.json.
  TempDir file_dir("lm-generate-file");
  exogym::runtime::lm::TextGenerator from_file(tiny_text_run(file_dir.path(), "file"), exogym::test::test_loader());
  CHECK(from_file.vocabulary().id(U'\n') == 0);
  CHECK(from_file.generate("ROMEO:", options).size() == 5);
}

TEST_CASE("generation: clear errors for a missing run, a folder of variants, a non-text run", "[lm][generate]") {
  TempDir dir("lm-generate-errors");
  auto& loader = exogym::test::test_loader();
  CHECK(error_of([&] { exogym::runtime::lm::TextGenerator(dir / "nope", loader); }) ==
        (dir / "nope").string() + ": no such run folder");
  fs::create_directories(dir / "variants" / "ddp");
  write_text(dir / "variants" / "ddp" / "config.json", "{}");
  CHECK(error_of([&] { exogym::runtime::lm::TextGenerator(dir / "variants", loader); }) ==
        (dir / "variants").string() +
            ": a folder of variants, not a run folder; pick one of: " + (dir / "variants" / "ddp").string());

  exogym::test::run_json(exogym::test::small_manifest(1), dir.path());
  CHECK(error_of([&] { exogym::runtime::lm::TextGenerator(dir / "run", loader); }) ==
        (dir / "run").string() +
            ": trained on dataset \"synthetic\", which has no character vocabulary; exogym-generate samples from "
            "runs on text-char data");

  TempDir text("lm-generate-nomodel");
  const fs::path run = tiny_text_run(text.path());
  fs::remove(run / "model.pt");
  CHECK_THAT(error_of([&] { exogym::runtime::lm::TextGenerator(run, loader); }),
             Catch::StartsWith((run / "model.pt").string() + ": no such file"));
}

TEST_CASE("exogym-generate streams a continuation of the prompt, the same seed gives the same text",
          "[lm][generate][cli]") {
  TempDir dir("lm-generate-cli");
  const fs::path run = tiny_text_run(dir.path());
  const auto cli = [&](const std::string& args, const std::string& log) {
    const std::string command =
        std::string(EXOGYM_BINARY_DIR) + "/bin/exogym-generate " + args + " > " + (dir / log).string() + " 2>&1";
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  const std::string common = run.string() + " --prompt 'JULIET:' --tokens 80 --temperature 0.9 --top-k 20";
  REQUIRE(cli(common + " --seed 3", "a.txt") == 0);
  REQUIRE(cli(common + " --seed 3", "b.txt") == 0);
  REQUIRE(cli(common + " --seed 4", "c.txt") == 0);
  const std::string a = read_text(dir / "a.txt");
  INFO(a);
  CHECK(a.rfind("JULIET:", 0) == 0);
  CHECK(a.back() == '\n');
  CHECK(a.size() <= 7 + 80 + 1);
  CHECK(a == read_text(dir / "b.txt"));
  CHECK(a != read_text(dir / "c.txt"));
  const CharVocabulary v = CharVocabulary::reference();
  for (const char c : a) CHECK(v.id(static_cast<unsigned char>(c)).has_value());
  // The library, with the same options, produces the same text.
  exogym::runtime::lm::TextGenerator generator(run, exogym::test::test_loader());
  exogym::runtime::lm::SampleOptions options;
  options.max_tokens = 80, options.temperature = 0.9, options.top_k = 20, options.seed = 3;
  CHECK(a == "JULIET:" + generator.generate("JULIET:", options) + "\n");

  CHECK(cli(run.string() + " --prompt 'Zoë'", "bad-prompt.txt") == 2);
  CHECK_THAT(read_text(dir / "bad-prompt.txt"),
             Catch::Contains("exogym-generate: the prompt: character 'ë' (U+00EB)") &&
                 Catch::Contains("not in the vocabulary"));
  CHECK(cli((dir / "nope").string(), "missing.txt") == 1);
  CHECK(read_text(dir / "missing.txt") == "exogym-generate: " + (dir / "nope").string() + ": no such run folder\n");
  CHECK(cli(run.string() + " --top-k -1", "usage.txt") == 2);
  CHECK(cli("--help", "help.txt") == 0);
  CHECK_THAT(read_text(dir / "help.txt"), Catch::Contains("usage: exogym-generate") && Catch::Contains("--top-k"));
}
