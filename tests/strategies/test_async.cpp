// Asynchronous strategies (sdk/async.h, runtime/async/async_schedule.h,
// plugins async_diloco and fedbuff): the slots a node computes in follow
// its speed, the server takes updates in order of arrival with the
// staleness that follows in closed form, runs reproduce bit for bit,
// fedbuff with equally fast nodes and a full buffer is fedavg bit for bit,
// async_diloco with a delay of K is DiLoCo up to rounding, a run resumed
// with updates in flight is the same run, nodes that fail and come back
// continue from the server's model, and what the runtime cannot run
// asynchronously is refused naming the manifest's field.
#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "checkpoint_fixtures.h"
#include "exogym/runtime/checkpoint/node_state.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "strategy_runs.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::test::bit_identical;
using exogym::test::load_model_pt;
using exogym::test::read_csv;
using exogym::test::sgd_spec;
using exogym::test::TempDir;
using exogym::test::train_in;
using exogym::test::with_strategy;
using nlohmann::json;

namespace {

// `plugin` on `nodes` nodes with a fixed step time of 1 s, `speed` by rank,
// and a network so fast that transfers take about 1e-16 s.
json async_manifest(int nodes, const std::string& plugin, const json& options, const json& speed = json::object()) {
  json m = with_strategy(nodes, plugin, options);
  m["compute"] = {{"step_time", "1s"}};
  if (!speed.empty()) m["compute"]["speed"] = speed;
  m["network"] = {{"bandwidth", "1000000TB/s"}, {"latency", "0s"}};
  return m;
}

// summary.json's per-node entries, by node.
std::map<int, json> per_node(const fs::path& run) {
  std::map<int, json> out;
  const json summary = json::parse(exogym::test::read_text(run / "summary.json"));
  for (const auto& n : summary.at("communication").at("per_node")) out[n.at("node").get<int>()] = n;
  return out;
}

// metrics.csv's staleness rows as (step, node) -> value.
std::map<std::pair<int, int>, double> staleness(const fs::path& run) {
  std::map<std::pair<int, int>, double> out;
  for (const auto& row : read_csv(run / "metrics.csv")) {
    if (row.at("name") != "staleness") continue;
    out[{std::stoi(row.at("step")), std::stoi(row.at("node"))}] = std::stod(row.at("value"));
  }
  return out;
}

}  // namespace

TEST_CASE("async: a node computes in the slots its speed allows, and staleness counts the versions it missed",
          "[strategies][async]") {
  TempDir dir("async-slots");
  // Slots of 1 s; every transfer takes 0.15 s (latency). Node 0 (speed 1,
  // a round of 1 step) sends at 1, its update arrives at 1.15, its reply at
  // 1.3: a cycle of 1.3 s, so its updates arrive at 1.15, 2.45, 3.75, 5.05,
  // ... and it sits out the slots its replies skip (4 and 8). Node 1 (speed
  // 0.25: steps of 4 s) sends at 4, 8.3 and 12.6, arriving at 4.15, 8.45 and
  // 12.75 (after the last slot: the run ends when it has arrived). The
  // server's version is the count of updates before; staleness, that minus
  // the version the sender's round started from. An update is recorded at
  // the step of the slot its arrival falls in (the run's end: 12).
  json m = async_manifest(2, "async_diloco",
                          {{"H", 1}, {"dynamic_local_updates", false}, {"delay", 1}, {"optimizer", sgd_spec(0.05)}},
                          {{"1", 0.25}});
  m["network"]["latency"] = "150ms";
  m["train"]["max_steps"] = 12;
  const fs::path run = train_in(m, dir, "run");
  const auto nodes = per_node(run);
  CHECK(nodes.at(0).at("compute_s").get<double>() == Approx(10.0));  // slots 0-3, 5-7, 9-11
  CHECK(nodes.at(1).at("compute_s").get<double>() == Approx(12.0));  // slots 0, 4, 8: 3 steps of 4 s
  // 13 steps of 16 examples, not 2 nodes times 12 slots.
  CHECK(json::parse(exogym::test::read_text(run / "summary.json")).at("examples_trained") == 13 * 16);
  const std::map<std::pair<int, int>, double> expected = {
      {{1, 0}, 0}, {{2, 0}, 0}, {{3, 0}, 0},  {{4, 1}, 3},  {{5, 0}, 1},  {{6, 0}, 0},  {{7, 0}, 0},
      {{8, 1}, 3}, {{8, 0}, 1}, {{10, 0}, 0}, {{11, 0}, 0}, {{12, 1}, 3}, {{12, 0}, 1},
  };
  CHECK(staleness(run) == expected);
}

TEST_CASE("async: the same manifest gives the same run bit for bit", "[strategies][async]") {
  TempDir dir("async-repro");
  const json m =
      async_manifest(4, "async_diloco", {{"H", 4}, {"optimizer", sgd_spec(0.05)}}, {{"2", 0.25}, {"3", 0.5}});
  const fs::path a = train_in(m, dir, "a");
  const fs::path b = train_in(m, dir, "b");
  CHECK(bit_identical(load_model_pt(a / "model.pt"), load_model_pt(b / "model.pt")));
  CHECK(exogym::test::read_text(a / "train.csv") == exogym::test::read_text(b / "train.csv"));
  CHECK(exogym::test::read_text(a / "metrics.csv") == exogym::test::read_text(b / "metrics.csv"));
  CHECK(staleness(a).size() > 4);
}

TEST_CASE("async: fedbuff with equally fast nodes and a buffer of every node is fedavg bit for bit",
          "[strategies][async]") {
  TempDir dir("async-fedbuff");
  const json options = {{"H", 3}, {"optimizer", sgd_spec(0.05)}};
  json sync = with_strategy(4, "fedavg", options);
  const fs::path fedavg = train_in(sync, dir, "fedavg");
  const fs::path fedbuff = train_in(async_manifest(4, "fedbuff", options), dir, "fedbuff");
  CHECK(bit_identical(load_model_pt(fedavg / "model.pt"), load_model_pt(fedbuff / "model.pt")));
  // A buffer of 2 moves the model twice as often: another run.
  json half = options;
  half["buffer"] = 2;
  const fs::path two = train_in(async_manifest(4, "fedbuff", half), dir, "buffer2");
  CHECK_FALSE(bit_identical(load_model_pt(fedavg / "model.pt"), load_model_pt(two / "model.pt")));
}

TEST_CASE("async: async_diloco with equally fast nodes and a delay of K is DiLoCo up to rounding",
          "[strategies][async]") {
  TempDir dir("async-diloco");
  const json outer = {{"name", "sgd"}, {"lr", 0.7}, {"momentum", 0.9}, {"nesterov", true}};
  const fs::path diloco = train_in(
      with_strategy(4, "diloco", {{"H", 5}, {"optimizer", sgd_spec(0.05)}, {"outer_optimizer", outer}}), dir, "diloco");
  const fs::path async =
      train_in(async_manifest(
                   4, "async_diloco",
                   {{"H", 5}, {"optimizer", sgd_spec(0.05)}, {"outer_lr", 0.7}, {"outer_momentum", 0.9}, {"delay", 4}}),
               dir, "async");
  const auto a = load_model_pt(diloco / "model.pt");
  const auto b = load_model_pt(async / "model.pt");
  for (const auto& [name, t] : a) {
    INFO(name);
    CHECK((t - b.at(name)).abs().max().item<double>() < 1e-5);
  }
}

TEST_CASE("async: what cannot run asynchronously is refused naming the field", "[strategies][async]") {
  TempDir dir("async-refused");
  const json options = {{"H", 2}, {"optimizer", sgd_spec(0.05)}};
  int tries = 0;
  auto error_of = [&](const json& m) {
    try {
      train_in(m, dir, "r" + std::to_string(++tries));
    } catch (const exogym::sdk::ConfigError& e) {
      return e.path() + ": " + e.message();
    }
    return std::string("no error");
  };
  json measured = with_strategy(2, "fedbuff", options);
  CHECK_THAT(error_of(measured), Catch::StartsWith("compute.step_time: an asynchronous strategy needs"));
  json participation = async_manifest(2, "async_diloco", options);
  participation["participation"] = {{"per_round", 1}, {"round", 2}};
  CHECK_THAT(error_of(participation), Catch::StartsWith("participation: an asynchronous strategy has no partial"));
  json buffer = async_manifest(2, "fedbuff", {{"H", 2}, {"buffer", 3}, {"optimizer", sgd_spec(0.05)}});
  CHECK_THAT(error_of(buffer), Catch::StartsWith("strategy.options.buffer: a buffer of 3 updates never"));
}

TEST_CASE("async: a run resumed with updates in flight and replies on their way is the same run",
          "[strategies][async][checkpoint]") {
  for (const auto& [plugin, options] : exogym::test::async_strategies()) {
    SECTION(plugin) {
      TempDir dir("async-resume-" + plugin);
      json m = exogym::test::checkpointed_manifest(3, 5);
      m["checkpoint"]["keep"] = 5;
      m["strategy"] = {{"plugin", plugin}, {"options", options}};
      // Transfers of 150 ms each way: at most boundaries some update is
      // on its way to the server or some reply on its way back.
      m["compute"] = {{"step_time", "1s"}, {"speed", {{"1", 0.5}, {"2", 0.25}}}};
      m["network"] = {{"bandwidth", "1000000TB/s"}, {"latency", "150ms"}};
      m["train"]["max_steps"] = 23;
      exogym::test::train_into(m, dir / "whole");
      m["train"]["max_steps"] = 12;
      exogym::test::train_into(m, dir / "parts");
      exogym::test::resume_in(dir / "parts", {"train.max_steps=23"}, 10);
      exogym::test::require_same_run(dir / "whole", dir / "parts");
      int in_transit = 0;
      for (int node = 0; node < 3; ++node) {
        const json meta =
            exogym::runtime::checkpoint::read_node_state(dir / "parts" / "checkpoints" / "step-10", node, 10)
                .async.meta;
        REQUIRE(meta.is_object());
        in_transit += !meta.at("in_flight").is_null() + !meta.at("reply").is_null();
      }
      CHECK(in_transit > 0);
      // A run that ended (its last updates landed after its last
      // checkpoint), extended from that checkpoint.
      m["train"]["max_steps"] = 15;
      exogym::test::train_into(m, dir / "finished");
      exogym::test::resume_in(dir / "finished", {"train.max_steps=23"});
      exogym::test::require_same_run(dir / "whole", dir / "finished");
    }
  }
}

TEST_CASE("async: a node that fails and comes back continues from the server's model, reproducibly and resumably",
          "[strategies][async][checkpoint]") {
  TempDir dir("async-faults");
  json m = exogym::test::checkpointed_manifest(4, 5);
  m["checkpoint"]["keep"] = 5;
  m["strategy"] = {{"plugin", "async_diloco"},
                   {"options", {{"H", 3}, {"optimizer", {{"name", "adam"}, {"lr", 0.01}}}}}};
  m["compute"] = {{"step_time", "1s"}, {"speed", {{"1", 0.5}, {"3", 0.25}}}};
  m["network"] = {{"bandwidth", "1000000TB/s"}, {"latency", "150ms"}};
  // Node 3 fails while its first round's update is on its way (sent at 4 s)
  // and comes back at step 11; node 2 joins late, at step 7.
  m["faults"] = {{{"node", 3}, {"fail_at", 4}, {"rejoin_at", 11}}, {{"node", 2}, {"join_at", 7}}};
  m["train"]["max_steps"] = 24;
  exogym::test::train_into(m, dir / "whole");
  exogym::test::train_into(m, dir / "again");
  exogym::test::require_same_run(dir / "whole", dir / "again");
  m["train"]["max_steps"] = 13;
  exogym::test::train_into(m, dir / "parts");
  exogym::test::resume_in(dir / "parts", {"train.max_steps=24"}, 10);
  exogym::test::require_same_run(dir / "whole", dir / "parts");

  const fs::path run = dir / "whole";
  std::vector<std::string> events;
  for (const auto& row : read_csv(run / "events.csv")) events.push_back(row.at("event") + " " + row.at("node"));
  CHECK(events == std::vector<std::string>{"fail 3", "join 2", "rejoin 3"});
  // Node 3's update sent before it failed still reached the server (at
  // 4.15 s, step 4); the node then pulled the server's model when it came
  // back, and its next updates start from it: their staleness is small.
  const auto s = staleness(run);
  CHECK(s.count({4, 3}) == 1);
  int after = 0;
  for (const auto& [at, value] : s) {
    if (at.second != 3 || at.first <= 11) continue;
    ++after;
    CHECK(value < 8);
  }
  CHECK(after >= 1);
  int late = 0;
  for (const auto& [at, value] : s) late += at.second == 2;
  CHECK(late >= 2);  // node 2 takes part from step 7 on
}
