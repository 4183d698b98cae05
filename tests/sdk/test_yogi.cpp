// Yogi (sdk/internal/yogi.h), FedYogi's server optimizer: its step against
// the formula computed here in double, the sign rule that tells it from
// Adam, its spec, its checkpointed state, and DiLoCo with it as the outer
// optimizer (FedYogi).
#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <string>
#include <vector>

#include "checkpoint_fixtures.h"
#include "exogym/sdk/optim.h"
#include "exogym/sdk/optim_state.h"
#include "helpers.h"
#include "sdk_fixtures.h"
#include "testing.h"

using exogym::sdk::OptimizerSpec;
using exogym::test::config_error;
using nlohmann::json;

namespace {

// Yogi's update of one coordinate, in double, as yogi.h writes it.
struct Coordinate {
  double p, m = 0, v;
  int step = 0;
  void update(double g, double lr, double beta1, double beta2, double eps, bool bias_correction) {
    ++step;
    m = beta1 * m + (1 - beta1) * g;
    const double g2 = g * g;
    v = v - (1 - beta2) * (v > g2 ? 1.0 : v < g2 ? -1.0 : 0.0) * g2;
    double c = 1;
    if (bias_correction) c = std::sqrt(1 - std::pow(beta2, step)) / (1 - std::pow(beta1, step));
    p -= lr * c * m / (std::sqrt(v) + eps);
  }
};

}  // namespace

TEST_CASE("yogi's spec writes out its defaults and checks its hyper-parameters", "[sdk][optim][yogi]") {
  CHECK(OptimizerSpec::from_json("Yogi", "o").to_json() == json({{"name", "yogi"},
                                                                 {"lr", 1e-2},
                                                                 {"betas", {0.9, 0.999}},
                                                                 {"eps", 1e-3},
                                                                 {"initial_accumulator_value", 1e-6},
                                                                 {"weight_decay", 0.0},
                                                                 {"bias_correction", true}}));
  auto what = [](const json& value) {
    json spec = {{"name", "yogi"}};
    spec.update(value);
    return std::string(
        config_error([&] { OptimizerSpec::from_json(spec, "strategy.options.outer_optimizer"); }).what());
  };
  CHECK(what({{"eps", 0}}) == "strategy.options.outer_optimizer.eps: expected a positive number, got 0");
  CHECK(what({{"betas", {0.9, 1.0}}}) ==
        "strategy.options.outer_optimizer.betas: expected two numbers in [0, 1), got [0.9,1.0]");
  CHECK(what({{"bias_correction", "no"}}) ==
        "strategy.options.outer_optimizer.bias_correction: expected a boolean, got \"no\"");
}

TEST_CASE("yogi's steps equal its formula, and its second moment moves by a fixed step, not Adam's fraction",
          "[sdk][optim][yogi]") {
  for (const bool bias_correction : {true, false}) {
    INFO("bias_correction " << bias_correction);
    const double lr = 0.05, beta1 = 0.8, beta2 = 0.9, eps = 1e-3, v0 = 0.5;
    // Coordinates whose v starts above g² (it falls) and below it (it rises).
    const std::vector<double> start = {1.0, -2.0, 0.5};
    const std::vector<std::vector<double>> grads = {{0.1, 3.0, -0.2}, {0.2, -1.5, 0.0}, {-0.3, 2.0, 4.0}};
    at::Tensor p = at::tensor(start, at::kDouble).requires_grad_(true);
    auto yogi = OptimizerSpec::from_json({{"name", "yogi"},
                                          {"lr", lr},
                                          {"betas", {beta1, beta2}},
                                          {"eps", eps},
                                          {"initial_accumulator_value", v0},
                                          {"bias_correction", bias_correction}},
                                         "o")
                    .build({p});
    std::vector<Coordinate> expected;
    for (double x : start) expected.push_back({x, 0, v0});
    for (const auto& g : grads) {
      p.mutable_grad() = at::tensor(g, at::kDouble);
      yogi->step();
      for (size_t i = 0; i < g.size(); ++i) expected[i].update(g[i], lr, beta1, beta2, eps, bias_correction);
    }
    for (size_t i = 0; i < start.size(); ++i) {
      INFO("coordinate " << i);
      CHECK(p[static_cast<int64_t>(i)].item<double>() == Approx(expected[i].p).epsilon(1e-12));
    }
    // After the first step, coordinate 1 (g² = 9 > v0): Yogi's v rises by
    // (1 - beta2) * 9 = 0.9 to 1.4, where Adam's would be 0.9 * 0.5 + 0.9 = 1.35.
  }
  at::Tensor q = at::zeros({1}, at::kDouble).requires_grad_(true);
  auto yogi =
      OptimizerSpec::from_json({{"name", "yogi"}, {"betas", {0.9, 0.9}}, {"initial_accumulator_value", 0.5}}, "o")
          .build({q});
  q.mutable_grad() = at::full({1}, 3.0, at::kDouble);
  yogi->step();
  exogym::sdk::StateDict state;
  exogym::sdk::save_optimizer_state(*yogi, {q}, state, "");
  CHECK(state.at("0.exp_avg_sq").item<double>() == Approx(1.4).epsilon(1e-12));
  CHECK(state.at("0.exp_avg").item<double>() == Approx(0.3).epsilon(1e-12));
  CHECK(state.at("0.step").item<int64_t>() == 1);
}

TEST_CASE("yogi's state saved and loaded continues bit for bit", "[sdk][optim][yogi]") {
  const auto spec = OptimizerSpec::from_json({{"name", "yogi"}, {"weight_decay", 0.1}}, "o");
  at::Tensor a = at::linspace(-1, 1, 12).requires_grad_(true);
  at::Tensor b = a.detach().clone().requires_grad_(true);
  auto first = spec.build({a});
  auto gradient = [](int step) { return at::cos(at::arange(12, at::kFloat) * (step + 1)); };
  for (int step = 0; step < 3; ++step) {
    a.mutable_grad() = gradient(step);
    first->step();
  }
  exogym::sdk::StateDict saved;
  exogym::sdk::save_optimizer_state(*first, {a}, saved, "outer.");
  b.detach().copy_(a.detach());
  auto second = spec.build({b});
  exogym::sdk::load_optimizer_state(*second, {b}, saved, "outer.");
  for (int step = 3; step < 6; ++step) {
    a.mutable_grad() = gradient(step);
    b.mutable_grad() = gradient(step);
    first->step();
    second->step();
  }
  CHECK(at::equal(a.detach(), b.detach()));
}

TEST_CASE("diloco with yogi as its outer optimizer (FedYogi) learns and resumes bit for bit", "[sdk][optim][yogi]") {
  using namespace exogym::test;
  TempDir dir("fedyogi");
  json m = checkpointed_manifest(4, 6);
  m["strategy"] = {
      {"plugin", "diloco"},
      {"options", {{"H", 4}, {"outer_optimizer", {{"name", "yogi"}, {"lr", 0.05}, {"betas", {0.9, 0.99}}}}}}};
  m["train"]["max_steps"] = 24;
  const auto whole = train_into(m, dir / "whole");
  REQUIRE(whole.final_eval.has_value());
  CHECK(whole.final_eval->global.loss < 0.9 * std::log(4.0));  // four classes: it learned
  m["train"]["max_steps"] = 10;  // stops inside a round, after a checkpoint with Yogi's moments
  train_into(m, dir / "parts");
  resume_in(dir / "parts", {"train.max_steps=24"});
  require_same_run(dir / "whole", dir / "parts");
}
