// The strategy fedprox (plugins/fedprox/fedprox.cpp): with mu = 0 it is
// fedavg bit for bit; the proximal term keeps the nodes' local steps closer
// to the round's model; the round's model is each node's anchor right after
// the round. (Resume bit for bit, failures and several processes:
// builtin_strategies in checkpoint_fixtures.cpp.)
#include <ATen/ATen.h>

#include <string>

#include "exogym/runtime/output/safetensors.h"
#include "helpers.h"
#include "strategy_runs.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::test::bit_identical;
using exogym::test::load_model_pt;
using exogym::test::sgd_spec;
using exogym::test::TempDir;
using exogym::test::train_in;
using exogym::test::with_strategy;
using nlohmann::json;

namespace {

// Node `node`'s tensors of the checkpoint of `step`, by name.
std::map<std::string, at::Tensor> fedprox_tensors(const fs::path& run, int64_t step, int node) {
  std::map<std::string, at::Tensor> out;
  for (auto& [name, t] :
       exogym::runtime::output::read_safetensors(run / "checkpoints" / ("step-" + std::to_string(step)) /
                                                 ("node-" + std::to_string(node) + ".safetensors"))
           .tensors) {
    out[name] = t;
  }
  return out;
}

// How far node `node`'s first-layer weight is from its anchor after `step` steps.
double drift(const fs::path& run, int64_t step, int node) {
  auto t = fedprox_tensors(run, step, node);
  return (t.at("model.layers.0.weight") - t.at("strategy.anchor.0")).norm().item<double>();
}

}  // namespace

TEST_CASE("fedprox with mu 0 is fedavg bit for bit, islands included", "[strategies][fedprox]") {
  TempDir dir("fedprox-fedavg");
  const json fedavg = {{"H", 3}, {"island_size", 2}, {"optimizer", sgd_spec(0.05)}};
  json fedprox = fedavg;
  fedprox["mu"] = 0.0;
  const fs::path a = train_in(with_strategy(4, "fedavg", fedavg), dir, "fedavg");
  const fs::path b = train_in(with_strategy(4, "fedprox", fedprox), dir, "fedprox");
  CHECK(bit_identical(load_model_pt(a / "model.pt"), load_model_pt(b / "model.pt")));
  fedprox["mu"] = 1.0;
  const fs::path c = train_in(with_strategy(4, "fedprox", fedprox), dir, "mu1");
  CHECK_FALSE(bit_identical(load_model_pt(a / "model.pt"), load_model_pt(c / "model.pt")));
}

TEST_CASE("fedprox pulls local steps toward the round's model, which is the anchor after each round",
          "[strategies][fedprox]") {
  TempDir dir("fedprox-drift");
  auto run_with = [&](double mu, const std::string& name) {
    json m = with_strategy(3, "fedprox", {{"H", 4}, {"mu", mu}, {"optimizer", sgd_spec(0.05)}});
    m["checkpoint"] = {{"interval", 1}, {"keep", 100}};
    m["train"]["max_steps"] = 8;
    return train_in(m, dir, name);
  };
  const fs::path free = run_with(0.0, "mu0"), pulled = run_with(10.0, "mu10");
  for (int64_t step : {2, 3, 6, 7}) {
    for (int node = 0; node < 3; ++node) {
      INFO("after step " << step << ", node " << node);
      CHECK(drift(pulled, step, node) < 0.8 * drift(free, step, node));
    }
  }
  // After a round (steps 4 and 8) every node's anchor is the average it holds.
  for (int64_t step : {4, 8}) {
    for (int node = 0; node < 3; ++node) {
      auto t = fedprox_tensors(pulled, step, node);
      CHECK(at::equal(t.at("model.layers.0.weight"), t.at("strategy.anchor.0")));
      CHECK(at::equal(t.at("strategy.anchor.0"), fedprox_tensors(pulled, step, 0).at("strategy.anchor.0")));
    }
  }
}
