// The strategy fedprox (plugins/fedprox/fedprox.cpp): with mu = 0 it is
// fedavg bit for bit; the proximal term keeps the nodes' local steps closer
// to the round's model; the round's model is each node's anchor right after
// the round; with partial work a slow node takes the steps it finishes by
// the fastest nodes' deadline, and the round ends then. (Resume bit for bit,
// failures and several processes: builtin_strategies in
// checkpoint_fixtures.cpp.)
#include <ATen/ATen.h>

#include <string>

#include "checkpoint_fixtures.h"
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

// FedProx on 4 nodes, rounds of H = 4 steps of 10 ms, node 3 at `speed`,
// checkpoints every 3 steps.
json stragglers(double speed, bool partial_work, int64_t steps = 12) {
  json m = exogym::test::checkpointed_manifest(4, 3);
  m["strategy"] = {{"plugin", "fedprox"},
                   {"options", {{"H", 4}, {"mu", 0.1}, {"partial_work", partial_work}, {"optimizer", sgd_spec(0.05)}}}};
  m["compute"]["speed"] = {{"3", speed}};
  m["train"]["max_steps"] = steps;
  return m;
}

// The local steps each node reported for the round ending at each step.
std::map<int64_t, std::map<int, double>> local_steps(const fs::path& run) {
  std::map<int64_t, std::map<int, double>> out;
  for (const auto& row : exogym::test::read_csv(run / "metrics.csv"))
    if (row.at("name") == "local_steps")
      out[std::stoll(row.at("step"))][std::stoi(row.at("node"))] = std::stod(row.at("value"));
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

TEST_CASE(
    "fedprox partial work: a node at half speed takes half the round's steps, and the round ends with the fast "
    "nodes'",
    "[strategies][fedprox]") {
  TempDir dir("fedprox-partial");
  const fs::path waited = train_in(stragglers(0.5, false), dir, "waited");
  const fs::path partial = train_in(stragglers(0.5, true), dir, "partial");
  const fs::path even = train_in(stragglers(1.0, true), dir, "even");
  // Node 3 computes 2 of each round's 4 steps, the others all 4 (rows at
  // each round's last 0-based step).
  const std::map<int, double> round = {{0, 4}, {1, 4}, {2, 4}, {3, 2}};
  CHECK(local_steps(partial) == std::map<int64_t, std::map<int, double>>{{3, round}, {7, round}, {11, round}});
  CHECK(local_steps(waited).empty());
  // Its 2 steps of 20 ms end with the others' 4 of 10 ms: the run takes the
  // time of one with no straggler, where waiting for it takes 4 x 20 ms a
  // round.
  const json p = exogym::test::summary_of(partial), e = exogym::test::summary_of(even),
             w = exogym::test::summary_of(waited);
  const auto time = [](const json& summary) { return summary["simulated"]["time_s"].get<double>(); };
  const auto compute = [](const json& summary, int node) {
    return summary["communication"]["per_node"][node]["compute_s"].get<double>();
  };
  const double rounds = 3;
  CHECK(time(p) == Approx(time(e)).epsilon(1e-12));
  CHECK(time(w) - time(p) == Approx(rounds * 0.04).epsilon(1e-9));
  CHECK(compute(p, 3) == Approx(rounds * 2 * 0.02).epsilon(1e-12));
  CHECK(compute(p, 0) == Approx(rounds * 4 * 0.01).epsilon(1e-12));
  // Its fewer steps change the model; with every node at one speed, partial
  // work changes nothing, and speeds count relative to the fastest node's.
  CHECK_FALSE(bit_identical(load_model_pt(waited / "model.pt"), load_model_pt(partial / "model.pt")));
  const fs::path full = train_in(stragglers(1.0, false), dir, "full");
  CHECK(bit_identical(load_model_pt(full / "model.pt"), load_model_pt(even / "model.pt")));
  json all_slow = stragglers(0.5, true);
  all_slow["compute"]["speed"] = {{"0", 0.5}, {"1", 0.5}, {"2", 0.5}, {"3", 0.5}};
  CHECK(bit_identical(load_model_pt(full / "model.pt"), load_model_pt(train_in(all_slow, dir, "slow") / "model.pt")));
  // A node too slow for one step by the deadline still takes one.
  CHECK(local_steps(train_in(stragglers(0.1, true, 4), dir, "tenth")).at(3).at(3) == 1);
}

TEST_CASE("fedprox partial work resumes exactly in the middle of a round, and stacked gives the per-node run",
          "[strategies][fedprox]") {
  TempDir dir("fedprox-partial-resume");
  json m = stragglers(0.5, true);
  exogym::test::train_into(m, dir / "whole");
  // Step 6: node 3 idles through the round's last two steps.
  m["train"]["max_steps"] = 6;
  exogym::test::train_into(m, dir / "parts");
  exogym::test::resume_in(dir / "parts", {"train.max_steps=12"});
  exogym::test::require_same_run(dir / "whole", dir / "parts");
  // A stack computes without the idle node and steps the others apart.
  json stacked = stragglers(0.5, true);
  stacked["execution"] = "stacked";
  const fs::path run = train_in(stacked, dir, "stacked");
  CHECK(bit_identical(load_model_pt(dir / "whole" / "model.pt"), load_model_pt(run / "model.pt")));
  const json steps = exogym::test::summary_of(run)["execution"]["local_steps"];
  // Together when all 4 compute (a round's first 2 steps), apart otherwise.
  CHECK(steps["together"] == 3 * 2 * 4);
  CHECK(steps["apart"] == 3 * 2 * 3);
}
