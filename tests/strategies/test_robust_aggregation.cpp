// Robust aggregation (plugins/modules/aggregation/robust_aggregation.h): the median,
// the trimmed mean and Krum against hand-computed values, their refusals,
// a corrupted sender that moves the mean but not them, and fedavg's
// "aggregator" against a node of the manifest's "adversaries".
#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "exogym/modules/aggregation/robust_aggregation.h"
#include "exogym/modules/aggregation/shared_aggregates.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "strategy_runs.h"
#include "testing.h"

namespace modules = exogym::modules;
using exogym::test::floats;
using modules::Aggregator;
using modules::AggregatorSpec;

namespace {

// One tensor per rank.
std::vector<std::vector<at::Tensor>> per_rank(std::vector<std::vector<float>> values) {
  std::vector<std::vector<at::Tensor>> out;
  for (auto& v : values) out.push_back({floats(v)});
  return out;
}

}  // namespace

TEST_CASE("median and trimmed mean work coordinate by coordinate", "[robust]") {
  const auto odd = per_rank({{1, 10}, {5, -2}, {3, 4}});
  CHECK(at::equal(modules::aggregate(odd, {Aggregator::Median}).at(0), floats({3, 4})));
  const auto even = per_rank({{1, 10}, {5, -2}, {3, 4}, {100, 0}});
  CHECK(at::equal(modules::aggregate(even, {Aggregator::Median}).at(0), floats({4, 2})));  // (3+5)/2, (0+4)/2
  // Five ranks, trim 0.2: one cut at each end of every coordinate.
  const auto five = per_rank({{1, 0}, {2, 0}, {3, 0}, {4, 0}, {1000, -1000}});
  AggregatorSpec trimmed{Aggregator::TrimmedMean, 0.2};
  CHECK(at::equal(modules::aggregate(five, trimmed).at(0), floats({3, 0})));
  CHECK(at::equal(modules::aggregate(five, {Aggregator::Mean}).at(0), floats({202, -200})));
  // trim 0.1 of 5 cuts none: the mean.
  CHECK(at::equal(modules::aggregate(five, {Aggregator::TrimmedMean, 0.1}).at(0), floats({202, -200})));
  // Shapes and dtypes come back as they were.
  std::vector<std::vector<at::Tensor>> shaped = {
      {at::ones({2, 3}, at::kDouble)}, {at::zeros({2, 3}, at::kDouble)}, {at::ones({2, 3}, at::kDouble)}};
  const auto median = modules::aggregate(shaped, {Aggregator::Median}).at(0);
  CHECK(median.sizes() == at::IntArrayRef({2, 3}));
  CHECK(median.scalar_type() == at::kDouble);
  CHECK(at::equal(median, at::ones({2, 3}, at::kDouble)));
  // A NaN sorts above every number: one NaN among three does not reach the median.
  CHECK(modules::aggregate(per_rank({{NAN}, {1}, {2}}), {Aggregator::Median}).at(0).item<float>() == 2);
  // trim 0.49 of 2 cuts none: the mean.
  CHECK(at::equal(modules::aggregate(per_rank({{1}, {2}}), {Aggregator::TrimmedMean, 0.49}).at(0), floats({1.5f})));
}

TEST_CASE("krum chooses the rank closest to its nearest others, and refuses too few nodes", "[robust]") {
  // Four honest ranks near (1, 1) in two tensors, one far away: f = 1 keeps
  // R - f - 2 = 2 nearest. Rank 2 sits in the middle of the honest ones.
  std::vector<std::vector<at::Tensor>> by_rank;
  const std::vector<std::vector<float>> a = {{1.1f}, {0.9f}, {1.0f}, {1.2f}, {50}};
  const std::vector<std::vector<float>> b = {{1.0f}, {1.0f}, {1.0f}, {0.9f}, {-50}};
  for (size_t r = 0; r < a.size(); ++r) by_rank.push_back({floats(a[r]), floats(b[r])});
  int64_t chosen = -1;
  const auto result = modules::aggregate(by_rank, {Aggregator::Krum, 0.1, 1}, &chosen);
  CHECK(chosen == 2);
  CHECK(at::equal(result.at(0), floats({1.0f})));
  CHECK(at::equal(result.at(1), floats({1.0f})));
  REQUIRE_THROWS_WITH(modules::aggregate(per_rank({{1}, {2}, {3}}), {Aggregator::Krum, 0.1, 1}),
                      "krum with f = 1 needs at least f + 3 = 4 nodes, got 3");
  REQUIRE_THROWS_WITH(modules::aggregate(per_rank({{1}, {2}, {3}}), {Aggregator::TrimmedMean, 0.5}),
                      Catch::Contains("trim 0.5") && Catch::Contains("outside [0, 0.5)"));
  REQUIRE_THROWS_AS(modules::aggregator_from_name("geomed", "strategy.options.aggregator"), exogym::sdk::ConfigError);
}

TEST_CASE("one corrupted sender moves the mean anywhere, the robust aggregates stay with the others", "[robust]") {
  at::Generator gen = at::detail::createCPUGenerator(4);
  const at::Tensor truth = at::randn({100}, gen);
  std::vector<std::vector<at::Tensor>> by_rank;
  for (int r = 0; r < 6; ++r) by_rank.push_back({truth + 0.01 * at::randn({100}, gen)});
  by_rank[3] = {truth * -1000};  // a sign flip, scaled
  auto error = [&](const AggregatorSpec& spec) {
    return (modules::aggregate(by_rank, spec).at(0) - truth).abs().max().item<double>();
  };
  CHECK(error({Aggregator::Mean}) > 100);
  CHECK(error({Aggregator::Median}) < 0.05);
  CHECK(error({Aggregator::TrimmedMean, 0.2}) < 0.05);
  CHECK(error({Aggregator::Krum, 0.1, 1}) < 0.05);
}

TEST_CASE("fedavg's median and krum withstand a node sending -4 times its parameters, the mean does not",
          "[robust][adversaries]") {
  using nlohmann::json;
  exogym::test::TempDir dir("robust-fedavg");
  auto final_loss = [&](json options, bool attacked, const std::string& name) {
    options["H"] = 2;
    options["optimizer"] = {{"name", "sgd"}, {"lr", 0.05}};
    json m = exogym::test::with_strategy(5, "fedavg", options);
    if (attacked) m["adversaries"] = json::parse(R"([{"node": 2, "attack": "sign_flip", "scale": 4}])");
    const auto run = exogym::test::train_in(m, dir, name);
    return json::parse(exogym::test::read_text(run / "summary.json")).at("last_train_loss").get<double>();
  };
  const double honest = final_loss(json::object(), false, "honest");
  CHECK(final_loss(json::object(), true, "mean") > honest + 0.5);  // about ln 4: chance
  CHECK(final_loss({{"aggregator", "median"}}, true, "median") < honest + 0.2);
  CHECK(final_loss({{"aggregator", "trimmed_mean"}, {"trim", 0.2}}, true, "trimmed") < honest + 0.2);
  CHECK(final_loss({{"aggregator", "krum"}, {"byzantine", 1}}, true, "krum") < honest + 0.2);
  // Bytes: the robust ones gather everyone's parameters, (K-1) S per node
  // per round, against the mean's 2 (K-1)/K S: 10 rounds of 1188 floats.
  auto sent = [&](const std::string& name) {
    return json::parse(exogym::test::read_text(dir / name / "run" / "summary.json"))
        .at("communication")
        .at("bytes_sent_per_node")
        .get<double>();
  };
  CHECK(sent("median") == 10 * 4.0 * 4752);
  CHECK(sent("honest") == Approx(10 * 2.0 * 4 / 5 * 4752));
  REQUIRE_THROWS_WITH(final_loss({{"aggregator", "trimmed_mean"}, {"trim", 0.5}}, false, "bad"),
                      Catch::Contains("strategy.options.trim") && Catch::Contains("[0, 0.5)"));
}

TEST_CASE("a robust aggregate is computed once per process and round", "[robust]") {
  exogym::modules::SharedAggregates shared;
  int computed = 0;
  auto compute = [&] {
    ++computed;
    return std::vector<at::Tensor>{at::full({3}, static_cast<double>(computed))};
  };
  auto first = shared.get(4, {0, 2}, compute);
  first.reset();  // members rarely run at once: the next one comes later
  auto second = shared.get(4, {0, 2}, compute);
  CHECK(computed == 1);
  CHECK(at::equal((*second)[0], at::full({3}, 1.0)));
  auto other_island = shared.get(4, {1, 3}, compute);
  CHECK(computed == 2);
  CHECK(other_island != second);
  // A newer round drops the older rounds' aggregates: a late member of
  // round 4 computes its aggregate again (the same bits, from the same
  // gathered values).
  shared.get(9, {0, 2}, compute);
  CHECK(computed == 3);
  shared.get(4, {1, 3}, compute);
  CHECK(computed == 4);
  shared.get(9, {0, 2}, compute);
  CHECK(computed == 4);
}

TEST_CASE("robust fedavg gives the same bits with its aggregates shared, whatever the parallelism",
          "[robust][islands]") {
  using nlohmann::json;
  exogym::test::TempDir dir("robust-shared");
  json m = exogym::test::with_strategy(
      6, "fedavg",
      {{"H", 2}, {"island_size", 3}, {"aggregator", "median"}, {"optimizer", {{"name", "sgd"}, {"lr", 0.05}}}});
  m["adversaries"] = json::parse(R"([{"node": 1, "attack": "noise", "scale": 2}])");
  for (int parallelism : {1, 3, 6}) {
    m["parallelism"] = parallelism;
    exogym::test::train_in(m, dir, "p" + std::to_string(parallelism));
  }
  const auto one = exogym::test::load_model_pt(dir / "p1" / "run" / "model.pt");
  CHECK(exogym::test::bit_identical(one, exogym::test::load_model_pt(dir / "p3" / "run" / "model.pt")));
  CHECK(exogym::test::bit_identical(one, exogym::test::load_model_pt(dir / "p6" / "run" / "model.pt")));
}
