// Strategy options checked once, at start-up, against everything they
// depend on (issue #53): numbers a strategy multiplies tensors by within a
// float's range, krum against the nodes every average can have (nodes,
// islands, participation, scheduled faults), an island larger than the run,
// an option of another aggregator, integers whose derived values overflowed
// (DES-LOC's 6 Kx, an asynchronous round of H times a speed) or that
// exited 1 (SparseLoCo's chunk). Each is exit 2 at its JSON path before a
// run folder exists.
#include <string>

#include "cli_helpers.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "strategy_runs.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using exogym::test::sgd_spec;
using nlohmann::json;

namespace {

// The ConfigError starting `manifest`'s run (base folder dir/name), or "(no error)".
std::string start_error(const json& manifest, const TempDir& dir, const std::string& name) {
  try {
    train_in(manifest, dir, name);
  } catch (const sdk::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

json krum(int nodes, json options = json::object()) {
  options["H"] = 2;
  options["aggregator"] = "krum";
  options["optimizer"] = sgd_spec(0.05);
  json m = with_strategy(nodes, "fedavg", options);
  m["train"]["max_steps"] = 8;
  return m;
}

}  // namespace

TEST_CASE("a strategy's learning rate beyond a float's range is refused at start-up, at its path",
          "[strategies][options]") {
  const std::string beyond =
      ": beyond a float's range (about 3.4e38), which the parameters' type cannot hold, got 1e+300";
  const std::vector<std::pair<std::string, json>> cases = {
      {"fedbuff", {{"server_lr", 1e300}}}, {"async_diloco", {{"outer_lr", 1e300}}}, {"noloco", {{"outer_lr", 1e300}}},
      {"noloco", {{"gamma", 1e300}}},      {"scaffold", {{"server_lr", 1e300}}},    {"fedprox", {{"mu", 1e300}}},
      {"diloco", {{"max_norm", 1e300}}},
  };
  for (const auto& [plugin, options] : cases) {
    INFO(plugin << " " << options.dump());
    CHECK(check_run_error(with_strategy(4, plugin, options)) == "strategy.options." + options.begin().key() + beyond);
  }
  // diloco's outer optimizer said so already, through its optimizer spec.
  CHECK(starts_with(check_run_error(with_strategy(4, "diloco", {{"outer_optimizer", {{"lr", 1e300}}}})),
                    "strategy.options.outer_optimizer.lr: beyond a float's range"));
}

TEST_CASE(
    "krum is checked against every average a step can have before training: nodes, islands, participation, "
    "faults",
    "[strategies][options][robust]") {
  TempDir dir("krum-nodes");
  const std::string needs =
      "strategy.options.byzantine: krum with f = 1 needs at least f + 3 = 4 nodes in every "
      "average, but ";
  CHECK(starts_with(start_error(krum(3), dir, "three"), needs + "the run has 3 nodes (found by node "));
  CHECK(start_error(krum(6, {{"byzantine", 3}}), dir, "six") == "(no error)");
  // Islands of 5 over 12 nodes leave one of 2.
  CHECK(starts_with(start_error(krum(12, {{"island_size", 5}}), dir, "islands"),
                    needs + "the run has 12 nodes, in islands of 5 one of 2 (found by node "));
  // Three of six drawn each round.
  json drawn = krum(6);
  drawn["participation"] = {{"per_round", 3}};
  CHECK(
      starts_with(start_error(drawn, dir, "drawn"),
                  needs + "a step can have 3 nodes live (of 6: participation or scheduled failures) (found by node "));
  // A node down from step 5 leaves three.
  json faulty = krum(4);
  faulty["faults"] = json::parse(R"([{"node": 3, "fail_at": 5}])");
  CHECK(
      starts_with(start_error(faulty, dir, "faulty"),
                  needs + "a step can have 3 nodes live (of 4: participation or scheduled failures) (found by node "));
  // Nothing trained, nothing left behind, exit 2: as a user runs it.
  json m = krum(6);
  m["participation"] = {{"per_round", 3}};
  m["output"]["dir"] = (dir / "out").string();
  const Outcome o = run_cli({write_manifest(dir, "m", m).string(), "--progress=none"}, dir / "cli.log");
  INFO(o.output);
  CHECK(o.code == 2);
  CHECK(o.output.find(needs + "a step can have 3 nodes live") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "out" / "test"));
}

TEST_CASE("fedavg refuses an island larger than the run and an option of another aggregator",
          "[strategies][options][robust]") {
  TempDir dir("fedavg-options");
  CHECK(starts_with(
      start_error(with_strategy(4, "fedavg", {{"island_size", 9}, {"optimizer", sgd_spec(0.05)}}), dir, "big"),
      "strategy.options.island_size: islands of 9 nodes, but the run has 4 nodes; at most nodes (null: "
      "one average over all of them)"));
  CHECK(start_error(with_strategy(4, "fedavg", {{"island_size", 4}, {"optimizer", sgd_spec(0.05)}}), dir, "whole") ==
        "(no error)");
  // trim was ignored with the mean.
  CHECK(
      starts_with(start_error(with_strategy(4, "fedavg", {{"trim", 0.2}, {"optimizer", sgd_spec(0.05)}}), dir, "trim"),
                  "strategy.options.trim: applies to the trimmed_mean aggregator only, and aggregator is mean: set "
                  "\"aggregator\": \"trimmed_mean\", or leave trim out"));
  CHECK(starts_with(
      start_error(
          with_strategy(4, "fedavg", {{"aggregator", "median"}, {"byzantine", 1}, {"optimizer", sgd_spec(0.05)}}), dir,
          "byzantine"),
      "strategy.options.byzantine: applies to the krum aggregator only, and aggregator is median"));
  CHECK(start_error(
            with_strategy(5, "fedavg", {{"aggregator", "trimmed_mean"}, {"trim", 0.2}, {"optimizer", sgd_spec(0.05)}}),
            dir, "trimmed") == "(no error)");
}

TEST_CASE("integer options whose derived values overflowed are range-checked at start-up", "[strategies][options]") {
  const std::string int_max = "expected a positive integer no larger than 2147483647, got ";
  // DES-LOC's Kv defaults to 6 Kx: Kx = INT64_MAX made it -6.
  CHECK(check_run_error(with_strategy(4, "desloc", {{"Kx", INT64_MAX}})) ==
        "strategy.options.Kx: " + int_max + "9223372036854775807");
  CHECK(check_run_error(with_strategy(4, "desloc", {{"Kv", 2147483648LL}})) ==
        "strategy.options.Kv: " + int_max + "2147483648");
  CHECK(check_run_error(with_strategy(4, "desloc", {{"Kx", 2147483647}})) == "(no error)");
  // An asynchronous round of H = INT64_MAX sent every step, one of 1e12 never.
  for (const std::string plugin : {"async_diloco", "fedbuff"}) {
    CHECK(check_run_error(with_strategy(4, plugin, {{"H", INT64_MAX}})) ==
          "strategy.options.H: " + int_max + "9223372036854775807");
    CHECK(check_run_error(with_strategy(4, plugin, {{"H", 1000000000000LL}})) ==
          "strategy.options.H: " + int_max + "1000000000000");
  }
  // SparseLoCo's chunk above 2^31 exited 1 without its path.
  CHECK(check_run_error(with_strategy(4, "sparseloco", {{"chunk", 2147483649LL}})) ==
        "strategy.options.chunk: " + int_max + "2147483649");
  CHECK(check_run_error(with_strategy(4, "fedavg", {{"aggregator", "krum"}, {"byzantine", 2147483648LL}})) ==
        "strategy.options.byzantine: expected a non-negative integer no larger than 2147483647, got 2147483648");
}

}  // namespace exogym::test
