// The strategy desloc (plugins/desloc/desloc.cpp): with its moments never
// averaged it is FedAvg with Adam bit for bit; each moment is the same on
// every node right after its own period and only then; the bytes are the
// closed form; bad input. (Resume bit for bit, failures and several
// processes: builtin_strategies in checkpoint_fixtures.cpp.)
#include <ATen/ATen.h>

#include <string>

#include "checkpoint_fixtures.h"
#include "exogym/runtime/output/safetensors.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "strategy_runs.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::test::bit_identical;
using exogym::test::load_model_pt;
using exogym::test::read_text;
using exogym::test::run_json;
using exogym::test::TempDir;
using exogym::test::train_in;
using exogym::test::with_strategy;
using nlohmann::json;

namespace {

const json adam = {{"name", "adam"}, {"lr", 1e-2}};

// Node `node`'s tensor whose name ends in `suffix` in the checkpoint of `step`.
at::Tensor node_state(const fs::path& run, int64_t step, int node, const std::string& suffix) {
  const auto file = exogym::runtime::output::read_safetensors(run / "checkpoints" / ("step-" + std::to_string(step)) /
                                                              ("node-" + std::to_string(node) + ".safetensors"));
  for (const auto& [name, tensor] : file.tensors) {
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return tensor;
    }
  }
  FAIL("no tensor ending in " << suffix << " in node " << node << "'s checkpoint of step " << step);
  return {};
}

bool same_on_every_node(const fs::path& run, int64_t step, const std::string& suffix, int nodes) {
  for (int r = 1; r < nodes; ++r) {
    if (!at::equal(node_state(run, step, r, suffix), node_state(run, step, 0, suffix))) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("desloc whose moments are never averaged is fedavg with adam, bit for bit", "[strategies][desloc]") {
  TempDir dir("desloc-fedavg");
  const fs::path fedavg = train_in(with_strategy(4, "fedavg", {{"H", 4}, {"optimizer", adam}}), dir, "fedavg");
  const fs::path desloc =
      train_in(with_strategy(4, "desloc", {{"Kx", 4}, {"Ku", 1000}, {"Kv", 1000}, {"optimizer", adam}}), dir, "desloc");
  CHECK(bit_identical(load_model_pt(fedavg / "model.pt"), load_model_pt(desloc / "model.pt")));
  // Averaging the moments too changes the run.
  const fs::path local_adam =
      train_in(with_strategy(4, "desloc", {{"Kx", 4}, {"Ku", 4}, {"Kv", 4}, {"optimizer", adam}}), dir, "local-adam");
  CHECK_FALSE(bit_identical(load_model_pt(fedavg / "model.pt"), load_model_pt(local_adam / "model.pt")));
}

TEST_CASE("desloc averages each of parameters, first and second moment right after its own period only",
          "[strategies][desloc]") {
  // Kx = 2, Ku = 3, Kv = 6, checkpoints after every step: after step t
  // (1-based) the parameters agree on every node when t is even, the first
  // moments when t is a multiple of 3, the second when a multiple of 6.
  TempDir dir("desloc-periods");
  const int K = 3;
  json m = with_strategy(K, "desloc", {{"Kx", 2}, {"Ku", 3}, {"Kv", 6}, {"optimizer", adam}});
  m["checkpoint"] = {{"interval", 1}, {"keep", 100}};
  m["train"]["max_steps"] = 12;
  const fs::path run = train_in(m, dir, "run");
  for (int64_t t = 1; t <= 12; ++t) {
    INFO("after step " << t);
    CHECK(same_on_every_node(run, t, "local.0.exp_avg", K) == (t % 3 == 0));
    CHECK(same_on_every_node(run, t, "local.0.exp_avg_sq", K) == (t % 6 == 0));
    CHECK(same_on_every_node(run, t, "local.2.exp_avg", K) == (t % 3 == 0));
  }
}

TEST_CASE("desloc's bytes are the closed form: one all-reduce of whatever is due", "[strategies][desloc][accounting]") {
  // small_manifest's MLP has 1188 parameters; 20 steps on 4 nodes. Kx = 2,
  // Ku = 6, Kv = 12 (the defaults for Kx = 2): 10 + 3 + 1 = 14 averages of
  // 1188 fp32 values, 2 (K-1)/K of them sent per node each time.
  TempDir dir("desloc-bytes");
  const int K = 4;
  const fs::path run = train_in(with_strategy(K, "desloc", {{"Kx", 2}, {"optimizer", adam}}), dir, "run");
  const double sent =
      json::parse(read_text(run / "summary.json")).at("communication").at("bytes_sent_per_node").get<double>();
  CHECK(sent == Approx(14 * 2.0 * (K - 1) / K * 4 * 1188));
  // Local Adam at the same K sends all three every 2 steps: 30 averages.
  const fs::path local = train_in(with_strategy(K, "desloc", {{"Kx", 2}, {"Ku", 2}, {"Kv", 2}}), dir, "local");
  const double local_sent =
      json::parse(read_text(local / "summary.json")).at("communication").at("bytes_sent_per_node").get<double>();
  CHECK(local_sent / sent == Approx(30.0 / 14));
}

TEST_CASE("desloc refuses an optimizer without Adam's moments and periods that are not positive",
          "[strategies][desloc]") {
  TempDir dir("desloc-errors");
  REQUIRE_THROWS_WITH(run_json(with_strategy(2, "desloc", {{"optimizer", "sgd"}}), dir.path()),
                      Catch::Contains("strategy.options.optimizer") && Catch::Contains("expected adam or adamw"));
  REQUIRE_THROWS_WITH(run_json(with_strategy(2, "desloc", {{"Ku", 0}}), dir.path()),
                      Catch::Contains("strategy.options.Ku"));
  REQUIRE_THROWS_WITH(run_json(with_strategy(2, "desloc", {{"Kx", -3}}), dir.path()),
                      Catch::Contains("strategy.options.Kx"));
}
