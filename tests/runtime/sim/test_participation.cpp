// Partial participation in whole runs (docs/simulation.md#partial-participation):
// the nodes each round trains with, the bytes and the state sent to nodes
// drawn again, full participation as the run without the section, resuming
// inside a round, failures during participation, and every bad input.
#include <ATen/ATen.h>

#include <algorithm>

#include "checkpoint_fixtures.h"
#include "exogym/runtime/command/comparison.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/sim/participation.h"
#include "exogym/runtime/train/training.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using exogym::test::check_run_error;
using exogym::test::kSmallMlpParameters;
using exogym::test::sorted_lines;
using nlohmann::json;

namespace {

json participation_diloco(int nodes, json participation) {
  json m = small_manifest(nodes);
  m["compute"] = {{"step_time", "10ms"}};
  m["strategy"] = {{"plugin", "diloco"}, {"options", {{"H", 4}, {"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}}}};
  if (!participation.is_null()) m["participation"] = std::move(participation);
  return m;
}

// train.csv without its last column (live_nodes).
std::string without_last_column(const fs::path& csv) {
  std::string out;
  for (const std::string& line : read_lines(csv)) out += line.substr(0, line.rfind(',')) + "\n";
  return out;
}

}  // namespace

TEST_CASE("participation: bad sections are refused naming the field, before anything trains", "[participation]") {
  const json m = participation_diloco(4, nullptr);
  auto with = [&](json participation) {
    json out = m;
    out["participation"] = std::move(participation);
    return out;
  };
  CHECK(check_run_error(with({{"fraction", 0}})).rfind("participation.fraction: expected a fraction in (0, 1]", 0) ==
        0);
  CHECK(check_run_error(with({{"fraction", 1.5}})).rfind("participation.fraction: expected a fraction in (0, 1]", 0) ==
        0);
  CHECK(check_run_error(with({{"fraction", -0.1}})).rfind("participation.fraction: expected a fraction", 0) == 0);
  CHECK(check_run_error(with({{"per_round", 0}})).rfind("participation.per_round: expected a positive integer", 0) ==
        0);
  CHECK(check_run_error(with({{"per_round", 5}})) ==
        "participation.per_round: 5 nodes drawn each round, but the run has 4 nodes; at most nodes");
  CHECK(check_run_error(with({{"per_round", 2}, {"fraction", 0.5}})).rfind("participation: gives both", 0) == 0);
  CHECK(check_run_error(with(json::object())).rfind("participation: gives neither per_round nor fraction", 0) == 0);
  CHECK(check_run_error(with({{"per_round", 2}, {"rounds", 3}})).find("participation.rounds: unknown") == 0);
  CHECK(check_run_error(with({{"per_round", 2}, {"round", 0}}))
            .rfind("participation.round: expected a positive integer", 0) == 0);
  CHECK(check_run_error(with({{"per_round", 2}, {"round", 2.5}})).rfind("participation.round: expected", 0) == 0);
  CHECK(check_run_error(with({{"per_round", 2}, {"round", "4"}})).rfind("participation.round: expected", 0) == 0);
  // DDP has no rounds: the round must be given.
  json ddp = with({{"per_round", 2}});
  ddp["strategy"] = small_manifest(4)["strategy"];
  CHECK(check_run_error(ddp).rfind("participation.round: strategy \"allreduce\" has no option H", 0) == 0);
  ddp["participation"]["round"] = 5;
  CHECK(check_run_error(ddp) == "(no error)");
  CHECK(check_run_error(with({{"fraction", 0.5}})) == "(no error)");
}

TEST_CASE(
    "participation: 2 of 4 nodes train each round, and bytes are 2-node rings plus the state sent to nodes drawn "
    "again",
    "[participation]") {
  TempDir dir("participation-two");
  json m = participation_diloco(4, {{"per_round", 2}});  // rounds of H = 4 steps: 5 rounds
  const auto result = run_json(m, dir.path());
  const fs::path run = dir / "run";

  // The draws, as the runtime makes them: every node alive, rounds of 4.
  runtime::sim::ParticipationSpec spec;
  spec.per_round = 2;
  runtime::sim::Participation draws(spec, 4, 7);
  std::vector<std::vector<int>> rounds;
  for (int64_t k = 0; k < 5; ++k) rounds.push_back(draws.take_part(4 * k, {0, 1, 2, 3}));
  int64_t returns = 0;
  for (size_t k = 1; k < rounds.size(); ++k) {
    for (int node : rounds[k]) returns += !std::binary_search(rounds[k - 1].begin(), rounds[k - 1].end(), node);
  }
  REQUIRE(returns > 0);  // the seed draws new nodes some rounds: recovery is exercised

  const auto train = read_csv(run / "train.csv");
  REQUIRE(train.size() == 20);
  for (const auto& row : train) CHECK(row.at("live_nodes") == "2");
  CHECK(result.examples_trained == 2 * 20 * 16);
  CHECK_FALSE(result.faults);
  REQUIRE(result.participation);
  CHECK(result.participation->round_steps == 4);
  CHECK(result.participation->node_steps_sat_out == 2 * 20);
  CHECK(result.participation->returns == returns);
  // A node drawn again gets DiLoCo's master copy and outer momentum (after
  // the first round's outer step, every later round has both): 2 x 4P bytes.
  CHECK(result.participation->transfer_bytes == returns * 2 * 4 * kSmallMlpParameters);
  CHECK(result.participation->transfer_time_s > 0);

  // Each round, one ring all-reduce of the parameters over 2 nodes:
  // 2 (2 - 1) / 2 x 4P bytes per drawn node; a node sitting out sends none.
  const json summary = json::parse(read_text(run / "summary.json"));
  CHECK(summary.at("communication").at("bytes_sent_total").get<double>() == Approx(5 * 2 * 4 * kSmallMlpParameters));
  std::map<int, int> drawn;
  for (const auto& r : rounds) {
    for (int node : r) ++drawn[node];
  }
  const json& per_node = summary.at("communication").at("per_node");
  for (int node = 0; node < 4; ++node) {
    INFO("node " << node);
    CHECK(per_node.at(node).at("bytes_sent").get<double>() == Approx(drawn[node] * 4 * kSmallMlpParameters));
  }
  CHECK(summary.at("participation").at("node_steps_sat_out") == 40);
  // Sitting out is no failure: nobody pays network.failure_timeout (30 s).
  CHECK(summary.at("simulated").at("time_s").get<double>() < 5);
  CHECK_FALSE(summary.contains("faults"));
  // events.csv lists failures only: nodes sitting out are not failures.
  CHECK(read_csv(run / "events.csv").empty());
  // The variants' table shows what sitting out cost.
  const std::string table = runtime::command::comparison_table({result});
  CHECK(table.find("sat_out") != std::string::npos);
  CHECK(table.find("state_sent") != std::string::npos);
  CHECK(table.find("lost_steps") == std::string::npos);  // no failures
  // config.json records the round taken from H.
  CHECK(json::parse(read_text(run / "config.json")).at("participation").at("round") == 4);
}

TEST_CASE("participation: drawing every node every round is the run without the section, bit for bit",
          "[participation]") {
  TempDir dir("participation-all");
  const json fedavg = {{"plugin", "fedavg"},
                       {"options", {{"H", 3}, {"optimizer", {{"name", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}}}}}};
  for (const json& strategy : {participation_diloco(4, nullptr)["strategy"], fedavg}) {
    const std::string name = strategy.at("plugin");
    SECTION(name) {
      json m = participation_diloco(4, nullptr);
      m["strategy"] = strategy;
      run_json(m, dir / "plain");
      m["participation"] = {{"per_round", 4}};
      run_json(m, dir / "all");
      m["participation"] = {{"fraction", 1.0}, {"round", 2}};
      run_json(m, dir / "fraction");
      const fs::path plain = dir / "plain" / "run";
      for (const fs::path& run : {dir / "all" / "run", dir / "fraction" / "run"}) {
        INFO(run.string());
        for (const char* file : {"model.pt", "validation.csv", "comm.csv"}) {
          INFO(file);
          CHECK(read_text(plain / file) == read_text(run / file));
        }
        CHECK(sorted_lines(plain / "metrics.csv") == sorted_lines(run / "metrics.csv"));  // nodes write in any order
        CHECK(read_text(plain / "train.csv") == without_last_column(run / "train.csv"));
        const json a = json::parse(read_text(plain / "summary.json")), b = json::parse(read_text(run / "summary.json"));
        CHECK(a.at("communication") == b.at("communication"));
        CHECK(a.at("simulated").at("time_s") == b.at("simulated").at("time_s"));
        CHECK(b.at("participation").at("node_steps_sat_out") == 0);
        CHECK(b.at("participation").at("returns") == 0);
      }
    }
  }
}

TEST_CASE(
    "participation: every built-in strategy trains with partial participation, with any parallelism, and "
    "resumes inside a round exactly",
    "[participation]") {
  for (const auto& [plugin, options] : builtin_strategies()) {
    SECTION(plugin) {
      TempDir dir("participation-" + plugin);
      json m = checkpointed_manifest(6, 5);
      m["strategy"] = {{"plugin", plugin}, {"options", options}};
      m["eval"]["interval"] = 6;
      m["train"]["max_steps"] = 24;
      // Rounds of H where the strategy has it, else of 4 steps.
      m["participation"] = {{"per_round", 3}};
      if (!options.contains("H")) m["participation"]["round"] = 4;
      m["parallelism"] = 1;
      run_json(m, dir / "p1");
      m["parallelism"] = 3;
      run_json(m, dir / "p3");
      const fs::path p1 = dir / "p1" / "run";
      require_same_run(p1, dir / "p3" / "run");
      for (const auto& row : read_csv(p1 / "train.csv")) CHECK(row.at("live_nodes") == "3");
      const json summary = json::parse(read_text(p1 / "summary.json"));
      CHECK(summary.at("participation").at("node_steps_sat_out") == 3 * 24);
      CHECK(summary.at("participation").at("returns").get<int64_t>() > 0);
      // Stopped after 13 steps, inside a round (12 to 14 or 15), resumed to 24.
      m["train"]["max_steps"] = 13;
      train_into(m, dir / "parts");
      resume_in(dir / "parts", {"train.max_steps=24"});
      require_same_run(p1, dir / "parts");
    }
  }
}

TEST_CASE(
    "participation with failures: draws among the alive nodes, failures apart from sitting out, and an exact "
    "resume",
    "[participation]") {
  TempDir dir("participation-faults");
  json m = checkpointed_manifest(6, 5);
  m["strategy"] = participation_diloco(6, nullptr)["strategy"];
  m["train"]["max_steps"] = 24;
  m["participation"] = {{"fraction", 0.5}};
  m["faults"] = json::parse(R"([{"node": 1, "fail_at": 5, "rejoin_at": 14}, {"node": 4, "join_at": 2},
                                {"node": 2, "fail_at": 9}])");
  m["parallelism"] = 2;
  const auto whole = run_json(m, dir / "whole");
  const fs::path run = dir / "whole" / "run";
  REQUIRE(whole.faults);
  REQUIRE(whole.participation);
  CHECK(whole.faults->failures == 2);
  CHECK(whole.faults->node_steps_lost == 9 + 2 + 15);
  // Taken, lost and sat out add up to every node's every step.
  int64_t taken = 0;
  for (const auto& row : read_csv(run / "train.csv")) taken += std::stoi(row.at("live_nodes"));
  CHECK(whole.examples_trained == taken * 16);
  CHECK(taken + whole.faults->node_steps_lost + whole.participation->node_steps_sat_out == 6 * 24);
  // events.csv: the failures, and the returns of failed nodes (when next drawn), nothing else.
  const auto events = read_csv(run / "events.csv");
  int fails = 0;
  for (const auto& e : events) {
    INFO(e.at("step") << " " << e.at("node") << " " << e.at("event"));
    CHECK((e.at("event") == "fail" || e.at("event") == "rejoin" || e.at("event") == "join"));
    fails += e.at("event") == "fail";
  }
  CHECK(fails == 2);
  m["train"]["max_steps"] = 15;  // inside the round of steps 12 to 15
  train_into(m, dir / "parts");
  resume_in(dir / "parts", {"train.max_steps=24"});
  require_same_run(run, dir / "parts");
}

TEST_CASE("participation with churn on the simulated clock: reproducible with any parallelism, and resumed exactly",
          "[participation]") {
  TempDir dir("participation-timed");
  json m = timed_churn_manifest();  // DiLoCo, H = 4, on 6 nodes for 40 steps
  m["participation"] = {{"per_round", 4}};
  m["parallelism"] = 1;
  const auto whole = run_json(m, dir / "p1");
  m["parallelism"] = 3;
  run_json(m, dir / "p3");
  const fs::path p1 = dir / "p1" / "run";
  require_same_run(p1, dir / "p3" / "run");
  REQUIRE(whole.faults);
  REQUIRE(whole.participation);
  CHECK(whole.faults->failures > 2);
  CHECK(whole.participation->node_steps_sat_out > 0);
  int64_t taken = 0;
  for (const auto& row : read_csv(p1 / "train.csv")) {
    taken += std::stoi(row.at("live_nodes"));
    CHECK(std::stoi(row.at("live_nodes")) <= 4);
  }
  CHECK(taken + whole.faults->node_steps_lost + whole.participation->node_steps_sat_out == 6 * 40);
  // Stopped at 17, inside the round of steps 16 to 19, resumed to 40.
  m["train"]["max_steps"] = 17;
  train_into(m, dir / "parts");
  resume_in(dir / "parts", {"train.max_steps=40"});
  require_same_run(p1, dir / "parts");
}

}  // namespace exogym::test
