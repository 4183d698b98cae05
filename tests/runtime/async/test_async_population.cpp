// An asynchronous strategy over a population of clients
// (runtime/async/async_schedule.h, docs/simulation.md): the nodes are the
// clients training at once, each takes on a new client from its share of
// the population as the server replies to its update, computes at that
// client's speed, and the run reproduces and resumes bit for bit.
#include <map>
#include <set>
#include <string>

#include "checkpoint_fixtures.h"
#include "helpers.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// metrics.csv's rows named `name`, by node: (step, value) in order.
std::map<int, std::vector<std::pair<int, double>>> rows_named(const fs::path& run, const std::string& name) {
  std::map<int, std::vector<std::pair<int, double>>> out;
  for (const auto& row : read_csv(run / "metrics.csv")) {
    if (row.at("name") != name) continue;
    out[std::stoi(row.at("node"))].emplace_back(std::stoi(row.at("step")), std::stod(row.at("value")));
  }
  return out;
}

}  // namespace

TEST_CASE("async population: each node takes on clients of its share as the server replies, reproducibly",
          "[strategies][async][population][checkpoint]") {
  TempDir dir("async-population");
  json m = async_population_manifest({1, 0.5});
  const fs::path run = dir / "whole";
  train_into(m, run);
  const auto clients = rows_named(run, "client");
  const auto updates = rows_named(run, "staleness");
  REQUIRE(clients.size() == 3);
  for (const auto& [node, rows] : clients) {
    INFO("node " << node);
    // Its first client at step 0, then one with each reply to an update.
    REQUIRE(rows.size() >= 3);
    CHECK(rows.front().first == 0);
    CHECK(rows.size() - 1 <= updates.at(node).size());
    std::set<int> distinct;
    for (const auto& [step, client] : rows) {
      // Node n trains the clients n, n + 3, n + 6, ...: never one another node trains.
      CHECK(static_cast<int>(client) % 3 == node);
      CHECK(client < 30);
      distinct.insert(static_cast<int>(client));
    }
    CHECK(distinct.size() >= 2);
  }
  // No rounds, no node sitting out: every node trains all run long.
  const json participation = json::parse(read_text(run / "summary.json")).at("participation");
  CHECK(participation.at("round_steps") == 0);
  CHECK(participation.at("node_steps_sat_out") == 0);
  // The same manifest, the same run; stopped at step 13 and resumed from
  // its checkpoint at step 10, the same run.
  train_into(m, dir / "again");
  require_same_run(run, dir / "again");
  m["train"]["max_steps"] = 13;
  train_into(m, dir / "parts");
  resume_in(dir / "parts", {"train.max_steps=24"}, 10);
  require_same_run(run, dir / "parts");
  // Clients at half speed take two slots a step: with every client at
  // speed 1 the nodes compute more steps in the same slots.
  const auto examples = [](const fs::path& folder) {
    return json::parse(read_text(folder / "summary.json")).at("examples_trained").get<int64_t>();
  };
  train_into(async_population_manifest({1}), dir / "fast");
  CHECK(examples(dir / "fast") > examples(run));
}

TEST_CASE("async population: what an asynchronous run over a population cannot follow is refused naming the field",
          "[strategies][async][population]") {
  TempDir dir("async-population-refused");
  int tries = 0;
  auto error_of = [&](const json& m) {
    try {
      train_into(m, dir / ("r" + std::to_string(++tries)));
    } catch (const sdk::ConfigError& e) {
      return e.path() + ": " + e.message();
    }
    return std::string("no error");
  };
  json fewer = async_population_manifest({1});
  fewer["participation"]["per_round"] = 2;
  CHECK_THAT(error_of(fewer), Catch::StartsWith("participation.per_round: 2 clients at once, but the run has 3 nodes"));
  json traced = async_population_manifest({1});
  std::string rows = "client,time,available,speed,bandwidth\n";
  for (int client = 0; client < 30; ++client) rows += std::to_string(client) + ",0,1,,\n";
  write_bytes(dir / "trace.csv", rows);
  traced["participation"]["trace"] = (dir / "trace.csv").string();
  CHECK_THAT(error_of(traced), Catch::StartsWith("participation.trace: an asynchronous strategy does not follow"));
  json lognormal = async_population_manifest({1});
  lognormal["compute"]["speed_distribution"] = {{"name", "lognormal"}, {"sigma", 0.5}};
  lognormal["participation"]["clients"] = 200000;
  CHECK_THAT(error_of(lognormal), Catch::StartsWith("compute.speed_distribution: an asynchronous strategy's slots"));
}

}  // namespace exogym::test
