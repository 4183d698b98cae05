// The SDK library: optimizer specs, LR schedules,
// gradient clipping, generator-driven dropout, seed derivation and the
// classifier base.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tensor.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <regex>
#include <set>
#include <string>

#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/sdk/classifier.h"
#include "exogym/sdk/comm.h"
#include "exogym/sdk/compose.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/optim.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/plugin_abi.h"
#include "exogym/sdk/random.h"
#include "helpers.h"
#include "sdk_fixtures.h"
#include "testing.h"

using exogym::sdk::ConfigError;
using exogym::sdk::LrSchedule;
using exogym::sdk::OptimizerSpec;
using exogym::sdk::OptionSpecs;
using exogym::test::config_error;
using exogym::test::kDilocoOuter;
using nlohmann::json;

namespace {

at::Tensor param_with_grad(std::initializer_list<float> values, std::initializer_list<float> grad) {
  at::Tensor p = at::tensor(values);
  p.set_requires_grad(true);
  p.mutable_grad() = at::tensor(grad);
  return p;
}

}  // namespace

TEST_CASE("optimizer specs write out PyTorch's defaults", "[sdk][optim]") {
  CHECK(OptimizerSpec::from_json("adam", "o").to_json() == json({{"name", "adam"},
                                                                 {"lr", 1e-3},
                                                                 {"betas", {0.9, 0.999}},
                                                                 {"eps", 1e-8},
                                                                 {"weight_decay", 0.0},
                                                                 {"amsgrad", false}}));
  CHECK(OptimizerSpec::from_json("AdamW", "o").to_json() == json({{"name", "adamw"},
                                                                  {"lr", 1e-3},
                                                                  {"betas", {0.9, 0.999}},
                                                                  {"eps", 1e-8},
                                                                  {"weight_decay", 0.01},
                                                                  {"amsgrad", false}}));
  CHECK(OptimizerSpec::from_json("sgd", "o").to_json() == json({{"name", "sgd"},
                                                                {"lr", 1e-3},
                                                                {"momentum", 0.0},
                                                                {"dampening", 0.0},
                                                                {"weight_decay", 0.0},
                                                                {"nesterov", false}}));
  CHECK(OptimizerSpec::from_json("RMSprop", "o").to_json() == json({{"name", "rmsprop"},
                                                                    {"lr", 1e-2},
                                                                    {"alpha", 0.99},
                                                                    {"eps", 1e-8},
                                                                    {"weight_decay", 0.0},
                                                                    {"momentum", 0.0},
                                                                    {"centered", false}}));
  CHECK(OptimizerSpec::from_json("adagrad", "o").to_json() == json({{"name", "adagrad"},
                                                                    {"lr", 1e-2},
                                                                    {"lr_decay", 0.0},
                                                                    {"weight_decay", 0.0},
                                                                    {"initial_accumulator_value", 0.0},
                                                                    {"eps", 1e-10}}));
  // Null means the header's default, AdamW.
  CHECK(OptimizerSpec::from_json(nullptr, "o").name == "adamw");
  // An object overrides some hyper-parameters; integers are stored as numbers.
  const auto spec = OptimizerSpec::from_json({{"name", "adamw"}, {"lr", 3e-4}, {"betas", {0.8, 0.95}}}, "o");
  CHECK(spec.lr() == 3e-4);
  CHECK(spec.params["betas"] == json({0.8, 0.95}));
  CHECK(spec.params["weight_decay"] == 0.01);
  CHECK(OptimizerSpec::from_json({{"name", "sgd"}, {"lr", 1}}, "o").params["lr"].is_number_float());
}

TEST_CASE("optimizer specs reject bad names and hyper-parameters", "[sdk][optim]") {
  auto what = [](const json& value) {
    return std::string(config_error([&] { OptimizerSpec::from_json(value, "strategy.options.optimizer"); }).what());
  };
  CHECK_THAT(what("adamx"), Catch::StartsWith("strategy.options.optimizer: unknown optimizer \"adamx\"; did you mean "
                                              "\"adam\"? known optimizers: adam, adamw, sgd, rmsprop, adagrad"));
  CHECK_THAT(what({{"name", "lion"}}),
             Catch::StartsWith("strategy.options.optimizer.name: unknown optimizer \"lion\""));
  CHECK_THAT(what({{"name", "adamw"}, {"lrr", 0.1}}),
             Catch::StartsWith("strategy.options.optimizer.lrr: unknown hyper-parameter of adamw; did you mean "
                               "\"lr\"? known hyper-parameters: lr, betas, eps, weight_decay, amsgrad"));
  CHECK_THAT(what({{"name", "sgd"}, {"betas", {0.9, 0.99}}}),
             Catch::StartsWith("strategy.options.optimizer.betas: unknown hyper-parameter of sgd"));
  CHECK(what({{"lr", 0}}) == "strategy.options.optimizer.lr: expected a positive number, got 0");
  CHECK(what({{"lr", "fast"}}) == "strategy.options.optimizer.lr: expected a positive number, got \"fast\"");
  CHECK(what({{"betas", {0.9}}}) == "strategy.options.optimizer.betas: expected two numbers in [0, 1), got [0.9]");
  CHECK(what({{"betas", {0.9, 1.0}}}) ==
        "strategy.options.optimizer.betas: expected two numbers in [0, 1), got [0.9,1.0]");
  CHECK(what({{"eps", -1e-8}}) == "strategy.options.optimizer.eps: expected a non-negative number, got -1e-08");
  CHECK(what({{"amsgrad", "yes"}}) == "strategy.options.optimizer.amsgrad: expected a boolean, got \"yes\"");
  CHECK(what({{"name", "sgd"}, {"momentum", -0.5}}) ==
        "strategy.options.optimizer.momentum: expected a non-negative number, got -0.5");
  CHECK(what(42) == "strategy.options.optimizer: expected an optimizer name or object, got 42");
}

TEST_CASE("nesterov needs momentum and no dampening", "[sdk][optim]") {
  auto error = config_error([] { OptimizerSpec::from_json({{"name", "sgd"}, {"nesterov", true}}, "o"); });
  CHECK(error.path() == "o.nesterov");
  CHECK_THAT(error.what(), Catch::Contains("nesterov requires momentum > 0 and dampening = 0"));
  CHECK_THROWS_AS(
      OptimizerSpec::from_json({{"name", "sgd"}, {"nesterov", true}, {"momentum", 0.9}, {"dampening", 0.1}}, "o"),
      ConfigError);
  CHECK_NOTHROW(OptimizerSpec::from_json({{"name", "sgd"}, {"nesterov", true}, {"momentum", 0.9}}, "o"));
  // Overriding the fallback's momentum to 0 breaks its nesterov: caught too.
  CHECK_THROWS_AS(OptimizerSpec::from_json({{"momentum", 0.0}}, "o", kDilocoOuter), ConfigError);
}

TEST_CASE("built SGD with Nesterov momentum matches a hand computation", "[sdk][optim]") {
  at::Tensor p = param_with_grad({1.0f, 2.0f}, {0.5f, -1.0f});
  const auto spec =
      OptimizerSpec::from_json({{"name", "sgd"}, {"lr", 0.1}, {"momentum", 0.9}, {"nesterov", true}}, "o");
  auto optimizer = spec.build({p});
  // PyTorch's SGD: buf = momentum * buf + g (buf = g at first); d = g + momentum * buf; p -= lr * d.
  // Step 1: buf = g, d = 1.9 g = [0.95, -1.9], p = [0.905, 2.19].
  optimizer->step();
  CHECK(p[0].item<float>() == Approx(0.905).epsilon(1e-6));
  CHECK(p[1].item<float>() == Approx(2.19).epsilon(1e-6));
  // Step 2 (same g): buf = 0.9 * g + g = 1.9 g, d = g + 1.71 g = 2.71 g = [1.355, -2.71], p = [0.7695, 2.461].
  optimizer->step();
  CHECK(p[0].item<float>() == Approx(0.7695).epsilon(1e-6));
  CHECK(p[1].item<float>() == Approx(2.461).epsilon(1e-6));
}

TEST_CASE("built optimizers carry every hyper-parameter and expose the LR", "[sdk][optim]") {
  for (const char* name : {"adam", "adamw", "sgd", "rmsprop", "adagrad"}) {
    at::Tensor p = param_with_grad({1.0f, -1.0f}, {0.1f, 0.2f});
    auto optimizer = OptimizerSpec::from_json(name, "o").build({p});
    REQUIRE(optimizer);
    CHECK(exogym::sdk::get_lr(*optimizer) == OptimizerSpec::from_json(name, "o").lr());
    exogym::sdk::set_lr(*optimizer, 0.25);
    CHECK(exogym::sdk::get_lr(*optimizer) == 0.25);
    CHECK_NOTHROW(optimizer->step());
  }
  at::Tensor p = param_with_grad({1.0f}, {1.0f});
  auto adamw = OptimizerSpec::from_json("adamw", "o").build({p});
  const auto& adamw_options = static_cast<const torch::optim::AdamWOptions&>(adamw->param_groups()[0].options());
  CHECK(adamw_options.weight_decay() == 0.01);
  CHECK(std::get<1>(adamw_options.betas()) == 0.999);
  auto sgd = OptimizerSpec::from_json("sgd", "o").build({p});
  CHECK(static_cast<const torch::optim::SGDOptions&>(sgd->param_groups()[0].options()).lr() == 1e-3);

  // AdamW, first step without weight decay: the update is lr * g / (|g| + eps), about lr * sign(g).
  at::Tensor q = param_with_grad({1.0f, 2.0f}, {0.5f, -3.0f});
  auto adam = OptimizerSpec::from_json({{"name", "adamw"}, {"lr", 0.1}, {"weight_decay", 0}}, "o").build({q});
  adam->step();
  CHECK(q[0].item<float>() == Approx(0.9).epsilon(1e-5));
  CHECK(q[1].item<float>() == Approx(2.1).epsilon(1e-5));
}

TEST_CASE("LR schedules: constant, cosine with warm-up, linear", "[sdk][optim]") {
  const LrSchedule constant = LrSchedule::from_json(nullptr, "s");
  CHECK(constant.name == "constant");
  CHECK(constant.factor(0, 100) == 1.0);
  CHECK(constant.factor(1000, 100) == 1.0);
  const LrSchedule warm = LrSchedule::from_json({{"warmup_steps", 4}}, "s");
  CHECK(warm.factor(0, 100) == 0.25);  // the first step already learns
  CHECK(warm.factor(3, 100) == 1.0);
  CHECK(warm.factor(4, 100) == 1.0);

  // Cosine, W = 10, M = 110 (the run's): the reference's 0.1 + 0.9 * 0.5 * (1 + cos(pi p)).
  const LrSchedule cosine = LrSchedule::from_json({{"name", "cosine"}, {"warmup_steps", 10}}, "s");
  CHECK(cosine.min_factor == 0.1);
  CHECK(cosine.factor(0, 110) == Approx(0.1));
  CHECK(cosine.factor(9, 110) == Approx(1.0));
  CHECK(cosine.factor(10, 110) == Approx(1.0));
  CHECK(cosine.factor(35, 110) == Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.25))));
  CHECK(cosine.factor(60, 110) == Approx(0.55));
  CHECK(cosine.factor(110, 110) == Approx(0.1));
  CHECK(cosine.factor(120, 110) == Approx(0.1));  // clamped: the reference rose again here
  // The schedule's own max_steps wins over the run's.
  const LrSchedule short_cosine = LrSchedule::from_json({{"name", "cosine"}, {"max_steps", 50}}, "s");
  CHECK(short_cosine.factor(25, 1000) == Approx(0.55));
  CHECK(short_cosine.factor(50, 1000) == Approx(0.1));

  const LrSchedule linear = LrSchedule::from_json("linear", "s");
  CHECK(linear.min_factor == 0.0);
  CHECK(linear.factor(0, 100) == Approx(1.0));
  CHECK(linear.factor(50, 100) == Approx(0.5));
  CHECK(linear.factor(100, 100) == Approx(0.0).margin(1e-12));
  CHECK(linear.factor(150, 100) == Approx(0.0).margin(1e-12));
  const LrSchedule linear_floor = LrSchedule::from_json({{"name", "linear"}, {"min_factor", 0.2}}, "s");
  CHECK(linear_floor.factor(50, 100) == Approx(0.6));

  // Round trip and aliases.
  CHECK(LrSchedule::from_json("cosine", "s").to_json() ==
        json({{"name", "cosine"}, {"warmup_steps", 0}, {"min_factor", 0.1}, {"max_steps", 0}}));
  CHECK(LrSchedule::from_json(cosine.to_json(), "s").to_json() == cosine.to_json());
  CHECK(LrSchedule::from_json("lambda_cosine", "s").name == "cosine");
}

TEST_CASE("LR schedule errors name the path", "[sdk][optim]") {
  auto what = [](const json& value) {
    return std::string(config_error([&] { LrSchedule::from_json(value, "strategy.options.lr_schedule"); }).what());
  };
  CHECK_THAT(
      what({{"name", "cosin"}}),
      Catch::StartsWith("strategy.options.lr_schedule.name: unknown schedule \"cosin\"; did you mean \"cosine\"?"));
  CHECK_THAT(what({{"warmup", 100}}),
             Catch::StartsWith("strategy.options.lr_schedule.warmup: unknown schedule setting; did you mean "
                               "\"warmup_steps\"?"));
  CHECK(what({{"min_factor", 1.5}}) == "strategy.options.lr_schedule.min_factor: expected a number in [0, 1], got 1.5");
  CHECK(what({{"max_steps", 2.5}}) ==
        "strategy.options.lr_schedule.max_steps: expected a non-negative integer, got 2.5");
  CHECK(what(3) == "strategy.options.lr_schedule: expected a schedule name or object, got 3");
}

TEST_CASE("clip_grad_norm scales by max_norm / (norm + 1e-6)", "[sdk][optim]") {
  at::Tensor a = param_with_grad({0.0f, 0.0f}, {3.0f, 4.0f});
  at::Tensor b = param_with_grad({0.0f}, {12.0f});
  at::Tensor no_grad = at::tensor({1.0f});  // skipped
  // Under the limit: untouched, and the norm is still returned.
  CHECK(exogym::sdk::clip_grad_norm({a, b, no_grad}, 100.0) == Approx(13.0));
  CHECK(a.grad()[0].item<float>() == 3.0f);
  CHECK(b.grad()[0].item<float>() == 12.0f);
  // sqrt(3^2 + 4^2 + 12^2) = 13.
  CHECK(exogym::sdk::clip_grad_norm({a, b, no_grad}, 1.0) == Approx(13.0));
  const double scale = 1.0 / (13.0 + 1e-6);
  CHECK(a.grad()[0].item<float>() == Approx(3.0 * scale).epsilon(1e-6));
  CHECK(a.grad()[1].item<float>() == Approx(4.0 * scale).epsilon(1e-6));
  CHECK(b.grad()[0].item<float>() == Approx(12.0 * scale).epsilon(1e-6));
  CHECK_FALSE(no_grad.grad().defined());
  CHECK(exogym::sdk::clip_grad_norm({no_grad}, 1.0) == 0.0);
}

TEST_CASE("dropout draws from the given generator", "[sdk][model]") {
  const at::Tensor x = at::ones({4000});
  auto seeded = [](uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); };
  const at::Tensor a = exogym::sdk::dropout(x, 0.3, true, seeded(42));
  const at::Tensor b = exogym::sdk::dropout(x, 0.3, true, seeded(42));
  const at::Tensor c = exogym::sdk::dropout(x, 0.3, true, seeded(7));
  CHECK(at::equal(a, b));
  CHECK_FALSE(at::equal(a, c));
  // Kept values are scaled by 1 / (1 - p); about p of them are dropped.
  const at::Tensor kept = a.ne(0);
  CHECK(a.masked_select(kept).sub(1.0 / 0.7).abs().max().item<double>() < 1e-6);
  CHECK(1.0 - kept.to(at::kFloat).mean().item<double>() == Approx(0.3).margin(0.03));
  // Identity when not training or p == 0; p must be in [0, 1).
  CHECK(exogym::sdk::dropout(x, 0.3, false, seeded(1)).is_same(x));
  CHECK(exogym::sdk::dropout(x, 0.0, true, seeded(1)).is_same(x));
  CHECK_THROWS_AS(exogym::sdk::dropout(x, 1.0, true, seeded(1)), exogym::sdk::Error);
  CHECK_THROWS_AS(exogym::sdk::dropout(x, -0.1, true, seeded(1)), exogym::sdk::Error);
  // Undefined generator: the default one.
  CHECK(exogym::sdk::dropout(x, 0.5, true, at::Generator()).sizes() == x.sizes());
}

TEST_CASE("channel-wise dropout zeroes whole channels", "[sdk][model]") {
  const at::Tensor x = at::ones({8, 16, 5, 5});
  const at::Tensor y = exogym::sdk::dropout(x, 0.5, true, at::make_generator<at::CPUGeneratorImpl>(3), true);
  // Every (example, channel) plane is constant: all 0 or all 2.
  const at::Tensor high = y.amax({2, 3});
  const at::Tensor low = y.amin({2, 3});
  CHECK(at::equal(high, low));
  CHECK(high.eq(0).logical_or(high.eq(2)).all().item<bool>());
  const double dropped = high.eq(0).to(at::kFloat).mean().item<double>();
  CHECK(dropped > 0.2);
  CHECK(dropped < 0.8);
  CHECK_THROWS_AS(exogym::sdk::dropout(at::ones({4}), 0.5, true, at::Generator(), true), exogym::sdk::Error);
}

TEST_CASE("the local step's learning rate follows its schedule", "[sdk][compose]") {
  const OptionSpecs specs = exogym::sdk::LocalStepOptions::specs().specs;
  const auto local = exogym::sdk::LocalStepOptions::from_json(exogym::sdk::validate_options(
      {{"optimizer", {{"name", "sgd"}, {"lr", 0.1}}}, {"lr_schedule", {{"name", "constant"}, {"warmup_steps", 4}}}},
      specs, "strategy.options"));
  CHECK(local.lr_at(0, 100) == Approx(0.1 / 4));
  CHECK(local.lr_at(2, 100) == Approx(0.1 * 3 / 4));
  CHECK(local.lr_at(10, 100) == Approx(0.1));
}

TEST_CASE("derive_seed gives distinct seeds per seed, stream and step, and keeps its values", "[sdk][random]") {
  using exogym::sdk::derive_seed;
  // Every strategy's shared draws and the synthetic data follow from these:
  // a change of formula changes every run.
  CHECK(derive_seed(0, 0, 0) == 0x238275BC38FCBE91ULL);
  CHECK(derive_seed(42, 0x464544415647ULL, 3) == 0xAF194CCA586E3EDEULL);
  CHECK(derive_seed(42, 1) == 0x93BE8420BB55B94CULL);  // step 0 by default
  std::set<uint64_t> seeds;
  for (uint64_t seed = 0; seed < 4; ++seed)
    for (uint64_t stream = 0; stream < 4; ++stream)
      for (uint64_t step = 0; step < 4; ++step) seeds.insert(derive_seed(seed, stream, step));
  CHECK(seeds.size() == 64);
  CHECK(derive_seed(7, 1, 2) != derive_seed(7, 2, 1));  // stream and step are not interchangeable

  // shared_generator is a CPU generator seeded with derive_seed.
  at::Generator shared = exogym::sdk::shared_generator(42, 5, 9);
  at::Generator expected = at::make_generator<at::CPUGeneratorImpl>(derive_seed(42, 5, 9));
  CHECK(at::equal(at::randn({8}, shared), at::randn({8}, expected)));
}

namespace {

// A classifier whose logits are a parameter, whatever the batch.
struct FixedLogits : torch::nn::Module {
  explicit FixedLogits(const at::Tensor& init) { logits = register_parameter("logits", init.clone()); }
  at::Tensor logits;
};

class FixedClassifier final : public exogym::sdk::Classifier {
 public:
  explicit FixedClassifier(const at::Tensor& logits) : net_(std::make_shared<FixedLogits>(logits)) {}
  torch::nn::Module& network() override { return *net_; }
  at::Tensor logits(const exogym::sdk::Batch& /*batch*/) override { return net_->logits; }

 private:
  std::shared_ptr<FixedLogits> net_;
};

}  // namespace

TEST_CASE("a classifier scores its logits by cross-entropy and accuracy against \"target\"", "[sdk][model]") {
  FixedClassifier model(at::tensor({2.0f, 0.0f, 0.0f, 0.0f, 1.0f, 0.0f}).reshape({2, 3}));
  // Whole-number float targets are class indices too: example 0 is right, 1 wrong.
  const exogym::sdk::Batch batch = {{"target", at::tensor({0.0f, 2.0f})}};
  const double expected = (std::log(1 + 2 * std::exp(-2.0)) + std::log(std::exp(1.0) + 2)) / 2;

  const at::Tensor loss = model.loss(batch);
  CHECK(loss.item<double>() == Approx(expected));
  CHECK(loss.requires_grad());
  const exogym::sdk::EvalOutput out = model.evaluate(batch);
  CHECK(out.loss.item<double>() == Approx(expected));
  CHECK(out.metrics.at("accuracy").item<double>() == Approx(0.5));
  CHECK(model.metric_names() == std::vector<std::string>{"accuracy"});
  CHECK_THROWS_WITH(model.loss({}), Catch::Contains("the batch has no \"target\" tensor"));
}

TEST_CASE("reduce operations and the runtime fingerprint print as users read them", "[sdk]") {
  CHECK(std::string(exogym::sdk::to_string(exogym::sdk::ReduceOp::Sum)) == "sum");
  CHECK(std::string(exogym::sdk::to_string(exogym::sdk::ReduceOp::Avg)) == "avg");
  CHECK(std::string(exogym::sdk::to_string(exogym::sdk::ReduceOp::Min)) == "min");
  CHECK(std::string(exogym::sdk::to_string(exogym::sdk::ReduceOp::Max)) == "max");
  CHECK(std::string(exogym::sdk::runtime_fingerprint()) == EXOGYM_BUILD_FINGERPRINT);
  CHECK_THAT(exogym::sdk::runtime_fingerprint(), Catch::Contains(";torch=1.") || Catch::Contains(";torch=2."));
}

TEST_CASE("named_trainable_parameters names the trainable parameters in the model's order", "[sdk][model]") {
  auto plugin = exogym::test::test_loader().load("model", "mlp", "model.plugin");
  auto model = plugin->create_model(plugin->validate({{"hidden", {8}}}, "model.options"));
  model->network().named_parameters()["layers.0.bias"].set_requires_grad(false);  // a frozen one is left out
  const auto named = exogym::sdk::named_trainable_parameters(*model);
  const auto plain = exogym::sdk::trainable_parameters(*model);
  std::vector<std::string> names;
  for (const auto& p : named) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"layers.0.weight", "layers.1.weight", "layers.1.bias"});
  REQUIRE(plain.size() == named.size());
  for (size_t i = 0; i < named.size(); ++i) CHECK(named[i].tensor.is_same(plain[i]));
  CHECK(named[1].tensor.sizes() == at::IntArrayRef({10, 8}));
}

// Which headers the docs list is tools/check_sdk_headers.py's check.
TEST_CASE("the docs place each SDK function in its header", "[sdk][docs]") {
  namespace fs = std::filesystem;
  using exogym::test::read_text;
  const fs::path source = EXOGYM_SOURCE_DIR;
  // "`sdk::f` (`sdk/x.h`)" or "`sdk::f` / `sdk::g` (`sdk/x.h`)": x.h declares f (and g),
  // a function or a type.
  const std::regex placed(R"(`sdk::(\w+)`(?: / `sdk::(\w+)`)?\s+\(`sdk/(\w+\.h)`\))");
  int places = 0;
  for (const std::string page : {"plugins.md", "checkpoints.md"}) {
    const std::string text = read_text(source / "docs" / page);
    for (std::sregex_iterator it(text.begin(), text.end(), placed), end; it != end; ++it, ++places) {
      const std::string declared = read_text(source / "sdk" / (*it)[3].str());
      for (int name : {1, 2}) {
        if (!(*it)[name].matched) continue;
        INFO(page << ": sdk::" << (*it)[name] << " in sdk/" << (*it)[3]);
        // Declared: a function's "name(", or a type's "using name =", "struct name", "class name".
        const std::string n = (*it)[name].str();
        CHECK(std::regex_search(declared, std::regex("\\b" + n + "\\(|using " + n + " =|(struct|class) " + n + "\\b")));
      }
    }
  }
  CHECK(places >= 2);  // checkpoints.md's optimizer state and plugins.md's named parameters
}
