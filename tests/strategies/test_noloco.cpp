// The strategy noloco (plugins/modules/outer/noloco.h): its pairings, the outer
// step of a single pair against hand-computed values, its bytes and
// simulated time against the closed form, and bad options. (Resume bit for
// bit, failures and several processes: builtin_strategies in
// checkpoint_fixtures.cpp.)
#include <ATen/ATen.h>

#include <set>

#include "exogym/modules/outer/noloco.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "helpers.h"
#include "locked_assertions.h"
#include "strategy_runs.h"
#include "tensor_model.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::test::read_csv;
using exogym::test::read_text;
using exogym::test::run_json;
using exogym::test::TempDir;
using exogym::test::train_in;
using exogym::test::with_strategy;
using nlohmann::json;
namespace modules = exogym::modules;
namespace sdk = exogym::sdk;

using exogym::test::TensorModel;

namespace {

bool near(const at::Tensor& a, std::vector<double> b) {
  return (a - at::tensor(b, at::kDouble)).abs().max().item<double>() < 1e-12;
}

}  // namespace

TEST_CASE("noloco pairs the live nodes by a seeded random perfect matching, redrawn every round",
          "[strategies][noloco]") {
  const std::vector<int> live = {0, 2, 3, 5, 6, 7};
  std::set<std::vector<int>> distinct;
  for (int64_t round = 0; round < 8; ++round) {
    std::vector<int> partners;
    for (int r : live) {
      const int p = modules::NoLoCoModule::partner(7, round, live, r);
      CHECK(p != r);
      CHECK(std::find(live.begin(), live.end(), p) != live.end());
      CHECK(modules::NoLoCoModule::partner(7, round, live, p) == r);  // symmetric
      partners.push_back(p);
    }
    distinct.insert(partners);
  }
  CHECK(distinct.size() > 3);
  // An odd count: exactly one node sits the round out.
  int alone = 0;
  for (int r = 0; r < 5; ++r) alone += modules::NoLoCoModule::partner(3, 0, {0, 1, 2, 3, 4}, r) == -1 ? 1 : 0;
  CHECK(alone == 1);
}

TEST_CASE("noloco on a single pair is their average followed by the outer step, by hand", "[strategies][noloco]") {
  // H = 2: steps 1 and 3 sync. beta 0.7, alpha 0.9, gamma 0.5.
  std::vector<at::Tensor> after_first(2), after_second(2), average(2), momentum(2);
  exogym::test::run_nodes(2, 2, [&](int rank, sdk::Communicator& comm) {
    sdk::NodeContext ctx;
    ctx.rank = rank;
    ctx.num_nodes = 2;
    ctx.comm = &comm;
    ctx.seed = 7;
    TensorModel model({{"w", at::zeros({2}, at::kDouble)}});
    modules::NoLoCoModule noloco(2, 0.7, 0.9, 0.5);
    noloco.init(ctx, model);  // phi = [0, 0]
    // Inner steps (simulated): theta_0 = [1, 2], theta_1 = [3, 8].
    model.set(at::tensor(std::vector<double>{1.0 + 2 * rank, 2.0 + 6 * rank}, at::kDouble));
    noloco.communicate(ctx, model, 0);  // not a sync step
    LOCKED(CHECK(near(model.value(), {1.0 + 2 * rank, 2.0 + 6 * rank})));
    noloco.communicate(ctx, model, 1);
    after_first[rank] = model.value();
    // Next round: theta = phi + [r, -r].
    at::Tensor phi = model.value();
    model.set(at::tensor(std::vector<double>{phi[0].item<double>() + rank, phi[1].item<double>() - rank}, at::kDouble));
    noloco.communicate(ctx, model, 3);
    after_second[rank] = model.value();
    momentum[rank] = noloco.momentum()[0].clone();
    // With beta 1 and alpha 0 the outer step lands on the pair's average.
    modules::NoLoCoModule plain(1, 1.0, 0.0, std::nullopt);
    model.set(at::tensor(std::vector<double>{1.0 + 2 * rank, 2.0 + 6 * rank}, at::kDouble));
    plain.init(ctx, model);
    model.set(at::tensor(std::vector<double>{5.0 * rank, 1.0 - rank}, at::kDouble));
    plain.communicate(ctx, model, 0);
    average[rank] = model.value();
  });
  for (int r = 0; r < 2; ++r) {
    INFO("node " << r);
    // mean(delta) = [2, 5], mean(phi) - phi = 0: m = 0.7 [2, 5] = [1.4, 3.5].
    CHECK(near(after_first[r], {1.4, 3.5}));
    // mean(delta) = [0.5, -0.5]: m = 0.9 [1.4, 3.5] + 0.7 [0.5, -0.5] = [1.61, 2.8].
    CHECK(near(momentum[r], {1.61, 2.8}));
    CHECK(near(after_second[r], {3.01, 6.3}));
    // phi = [1, 2] + mean([5r, 1-r] - [1+2r, 2+6r]) = the mean of [0, 1] and [5, 0].
    CHECK(near(average[r], {2.5, 0.5}));
  }
  CHECK(at::equal(after_second[0], after_second[1]));
}

TEST_CASE("noloco's bytes and simulated time are the closed form: one exchange of 2 x the parameters per round",
          "[strategies][noloco][accounting]") {
  // small_manifest's MLP: 1188 fp32 parameters, S = 4752 bytes; 20 steps,
  // H = 5: 4 rounds. Each paired node sends phi and delta: 2 S.
  TempDir dir("noloco-bytes");
  const double S = 4752;
  auto summary_of = [&](int K, const std::string& name) {
    json m = with_strategy(K, "noloco", {{"H", 5}});
    m["network"] = {{"bandwidth", "100Mbit/s"}, {"latency", "2ms"}};
    m["compute"] = {{"step_time", "50ms"}};
    const fs::path run = train_in(m, dir, name);
    return std::make_pair(json::parse(read_text(run / "summary.json")), run);
  };
  const auto [even, even_run] = summary_of(4, "even");
  CHECK(even["communication"]["bytes_sent_total"].get<double>() == 4 * 4 * 2 * S);
  for (const auto& node : even["communication"]["per_node"]) {
    CHECK(node["bytes_sent"].get<double>() == 4 * 2 * S);
    CHECK(node["bytes_received"].get<double>() == 4 * 2 * S);
    // 20 steps of 50 ms and 4 exchanges of 2 ms + 2 S / 12.5 MB/s: nobody
    // waits, every pair meets at the same clock.
    CHECK(node["time_s"].get<double>() == Approx(20 * 0.05 + 4 * (0.002 + 2 * S / 12.5e6)).epsilon(1e-12));
  }
  int rows = 0;
  for (const auto& row : read_csv(even_run / "comm.csv")) {
    if (row.at("source") != "strategy") continue;
    ++rows;
    CHECK(row.at("collective") == "exchange");
    CHECK(std::stod(row.at("time_s")) == Approx(0.002 + 2 * S / 12.5e6).epsilon(1e-12));
  }
  CHECK(rows == 4);
  // 3 nodes: one pair per round, the third alone: exactly 2 nodes' bytes.
  const auto [odd, odd_run] = summary_of(3, "odd");
  CHECK(odd["communication"]["bytes_sent_total"].get<double>() == 4 * 2 * 2 * S);
}

TEST_CASE("noloco refuses an outer momentum of 1 or more, naming the option", "[strategies][noloco]") {
  auto plugin = exogym::test::test_loader().load("strategy", "noloco", "strategy.plugin");
  const json resolved = plugin->validate(json::object(), "strategy.options");
  CHECK(resolved["H"] == 50);
  CHECK(resolved["outer_lr"] == 0.7);
  CHECK(resolved["outer_momentum"] == 0.9);
  CHECK(resolved["gamma"].is_null());
  for (const auto& spec : plugin->options()) {
    INFO(spec.name);
    CHECK_FALSE(spec.doc.empty());
  }
  auto create = [&](const json& given) { plugin->create_strategy(plugin->validate(given, "strategy.options")); };
  REQUIRE_THROWS_WITH(create({{"outer_momentum", 1.0}}), "outer_momentum: expected a number in [0, 1), got 1.0");
  REQUIRE_THROWS_WITH(plugin->validate({{"outer_lr", 0}}, "strategy.options"),
                      Catch::StartsWith("strategy.options.outer_lr: expected"));
  REQUIRE_THROWS_WITH(plugin->validate({{"gamma", -1}}, "strategy.options"),
                      Catch::StartsWith("strategy.options.gamma: expected"));
  TempDir dir("noloco-errors");
  try {
    run_json(with_strategy(2, "noloco", {{"outer_momentum", 1.5}}), dir.path());
    FAIL("no error");
  } catch (const sdk::ConfigError& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("strategy.options.outer_momentum: expected a number in [0, 1), got 1.5"));
  }
}
