// Heterogeneous nodes drawn from a distribution (sim/node_factors.h):
// compute.speed_distribution and network.bandwidth_distribution. Each
// node's draw depends on the seed, the quantity and its rank alone; the
// distributions have the shape they say; nodes listed one by one keep
// their values; a run's clocks and summary.json follow the draws.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "exogym/runtime/manifest/manifest.h"
#include "helpers.h"
#include "manifest_fixtures.h"
#include "testing.h"

namespace {

using exogym::test::manifest::config_error;
using exogym::test::manifest::error_with;
using exogym::test::manifest::minimal;
using exogym::test::manifest::parse_one;
using nlohmann::json;

exogym::runtime::manifest::Manifest with(int nodes, const json& compute, const json& network = json::object()) {
  json doc = minimal();
  doc["nodes"] = nodes;
  doc["seed"] = 11;
  doc["compute"] = compute;
  if (!network.empty()) doc["network"] = network;
  return parse_one(doc);
}

std::vector<double> speeds(const exogym::runtime::manifest::Manifest& m) {
  std::vector<double> out;
  for (int r = 0; r < m.nodes; ++r) out.push_back(m.compute.speed.at(r));
  return out;
}

}  // namespace

TEST_CASE("drawn speeds depend on the seed and the node alone, and follow their distribution",
          "[manifest][heterogeneity]") {
  const json lognormal = {{"speed_distribution", {{"name", "lognormal"}, {"sigma", 0.5}}}};
  const std::vector<double> many = speeds(with(4000, lognormal));
  const std::vector<double> few = speeds(with(5, lognormal));
  for (size_t r = 0; r < few.size(); ++r) CHECK(few[r] == many[r]);  // the node count changes nothing
  // Another seed, other draws.
  json doc = minimal();
  doc["nodes"] = 5;
  doc["seed"] = 12;
  doc["compute"] = lognormal;
  CHECK(speeds(parse_one(doc)) != few);
  SECTION("lognormal: median 1, the logarithms' spread sigma") {
    std::vector<double> logs;
    for (double s : many) logs.push_back(std::log(s));
    double mean = 0, square = 0;
    for (double l : logs) mean += l / logs.size();
    for (double l : logs) square += (l - mean) * (l - mean) / logs.size();
    CHECK(std::abs(mean) < 0.03);  // 4000 draws: the standard error is 0.5 / 63 = 0.008
    CHECK(std::sqrt(square) == Approx(0.5).epsilon(0.05));
  }
  SECTION("uniform: within [low, high], mean in the middle") {
    const std::vector<double> u =
        speeds(with(4000, {{"speed_distribution", {{"name", "uniform"}, {"low", 0.5}, {"high", 2}}}}));
    double mean = 0;
    for (double s : u) {
      CHECK((s >= 0.5 && s <= 2));
      mean += s / u.size();
    }
    CHECK(mean == Approx(1.25).epsilon(0.02));
  }
  SECTION("tiers: each value in proportion to its weight") {
    const std::vector<double> t =
        speeds(with(4000, {{"speed_distribution", {{"name", "tiers"}, {"values", {1, 0.25}}, {"weights", {3, 1}}}}}));
    std::map<double, int> counts;
    for (double s : t) ++counts[s];
    REQUIRE(counts.size() == 2);
    CHECK(counts[0.25] / 4000.0 == Approx(0.25).margin(0.025));
  }
}

TEST_CASE("nodes listed one by one keep their speed and bandwidth, the others draw theirs",
          "[manifest][heterogeneity]") {
  const json compute = {{"speed", {{"2", 3.0}}}, {"speed_distribution", {{"name", "lognormal"}, {"sigma", 1}}}};
  const json network = {{"bandwidth", "1Gbit/s"},
                        {"bandwidth_distribution", {{"name", "tiers"}, {"values", {0.5, 2}}}},
                        {"nodes", {{"1", {{"bandwidth", "10Mbit/s"}}}, {"3", {{"latency", "50ms"}}}}}};
  const auto m = with(6, compute, network);
  CHECK(m.compute.speed.at(2) == 3.0);
  CHECK(m.network.per_node.at(1).bandwidth == 10e6 / 8);
  for (int r : {0, 2, 3, 4, 5}) {
    INFO("node " << r);
    const double factor = m.network.per_node.at(r).bandwidth / (1e9 / 8);
    CHECK((factor == 0.5 || factor == 2.0));
  }
  CHECK(m.network.per_node.at(3).latency == 0.05);  // its own latency, a drawn bandwidth
  // The bandwidths' draws leave the speeds' alone.
  CHECK(speeds(with(6, compute)) == speeds(m));
}

TEST_CASE("bad distributions are refused, naming the field", "[manifest][heterogeneity]") {
  auto at = [](const json& compute) { return error_with({{"compute", compute}}).path; };
  CHECK(at({{"speed_distribution", {{"name", "zipf"}}}}) == "compute.speed_distribution.name");
  CHECK(at({{"speed_distribution", {{"name", "lognormal"}}}}) == "compute.speed_distribution.sigma");
  CHECK(at({{"speed_distribution", {{"name", "lognormal"}, {"sigma", -1}}}}) == "compute.speed_distribution.sigma");
  CHECK(at({{"speed_distribution", {{"name", "uniform"}, {"low", 2}, {"high", 1}}}}) ==
        "compute.speed_distribution.high");
  CHECK(at({{"speed_distribution", {{"name", "tiers"}, {"values", json::array()}}}}) ==
        "compute.speed_distribution.values");
  CHECK(at({{"speed_distribution", {{"name", "tiers"}, {"values", {1, 2}}, {"weights", {1}}}}}) ==
        "compute.speed_distribution.weights");
  CHECK(at({{"speed_distribution", {{"name", "tiers"}, {"values", {0, 2}}}}}) ==
        "compute.speed_distribution.values[0]");
  CHECK(error_with({{"network", {{"bandwidth_distribution", {{"name", "uniform"}, {"low", 1}}}}}}).path ==
        "network.bandwidth_distribution.high");
}

TEST_CASE("a run's clocks and summary.json follow the drawn speeds and bandwidths", "[heterogeneity]") {
  using namespace exogym::test;
  TempDir dir("drawn-nodes");
  json m = small_manifest(4);
  m["compute"] = {{"step_time", "100ms"},
                  {"speed_distribution", {{"name", "tiers"}, {"values", {1, 0.25}}, {"weights", {1, 1}}}}};
  m["network"] = {{"bandwidth_distribution", {{"name", "lognormal"}, {"sigma", 1}}}};
  run_json(m, dir.path());
  const json summary = json::parse(read_text(dir / "run" / "summary.json"));
  const auto resolved = parse_one(m);
  for (const json& node : summary.at("communication").at("per_node")) {
    const int r = node.at("node");
    INFO("node " << r);
    const double speed = resolved.compute.speed.at(r);
    CHECK(node.at("speed").get<double>() == speed);
    CHECK(node.at("bandwidth_bytes_per_s").get<double>() == resolved.network.per_node.at(r).bandwidth);
    CHECK(node.at("compute_s").get<double>() == Approx(20 * 0.1 / speed).epsilon(1e-12));
  }
}
