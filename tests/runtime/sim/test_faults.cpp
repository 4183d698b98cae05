// Simulated failures and churn (docs/simulation.md#failures-and-churn): the
// schedule and its checks, collectives over the live nodes, recovery, the
// outputs, reproducibility and resuming. Every run here is under a watchdog:
// a run that hangs fails the test instead of stalling the suite.
#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "checkpoint_fixtures.h"
#include "exogym/runtime/checkpoint/node_state.h"
#include "exogym/runtime/comm/inprocess_group.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/sim/fault_schedule.h"
#include "exogym/runtime/sim/timed_churn.h"
#include "exogym/runtime/threads/abort_signal.h"
#include "exogym/runtime/train/setup.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Runs `body`; if it has not returned after `seconds`, the test binary ends
// with a message: a hang fails instead of stalling the suite.
template <typename Body>
auto under_watchdog(int seconds, Body body) {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(mutex);
    if (!cv.wait_for(lock, std::chrono::seconds(seconds), [&] { return done; })) {
      std::fprintf(stderr, "watchdog: a run with failures did not finish within %d s\n", seconds);
      std::_Exit(3);
    }
  });
  auto finish = [&] {
    {
      std::lock_guard<std::mutex> lock(mutex);
      done = true;
    }
    cv.notify_all();
    watchdog.join();
  };
  try {
    auto result = body();
    finish();
    return result;
  } catch (...) {
    finish();
    throw;
  }
}

runtime::train::TrainingResult run_watched(const json& manifest, const fs::path& dir) {
  fs::create_directories(dir);
  return under_watchdog(120, [&] { return run_json(manifest, dir); });
}

runtime::manifest::Manifest parsed(const json& manifest) {
  return runtime::manifest::parse_manifest(manifest, "/tmp", "test").runs.at(0);
}

std::string faults_error(const json& manifest) {
  try {
    parsed(manifest);
  } catch (const sdk::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

json with_faults(json manifest, json faults) {
  manifest["faults"] = std::move(faults);
  return manifest;
}

std::map<std::string, at::Tensor> checkpoint_tensors(const fs::path& checkpoint, int rank, int64_t step) {
  std::map<std::string, at::Tensor> out;
  for (auto& [name, tensor] : runtime::checkpoint::read_node_state(checkpoint, rank, step).file.tensors) {
    if (name.rfind("rng.", 0) != 0) out[name] = tensor;
  }
  return out;
}

}  // namespace

TEST_CASE("faults and churn that make no sense are refused naming the entry, before anything trains", "[faults]") {
  const json m = small_manifest(4);  // 20 steps
  CHECK(faults_error(with_faults(m, json::parse(R"([{"node": 4, "fail_at": 3}])"))) ==
        "faults[0].node: node 4 is not a node of the run: nodes run from 0 to 3");
  CHECK(faults_error(with_faults(m, json::parse(R"([{"node": 1, "fail_at": 8, "rejoin_at": 8}])"))) ==
        "faults[0].rejoin_at: the node rejoins at step 8, which is not after it fails (fail_at 8)");
  CHECK(faults_error(with_faults(m, json::parse(R"([{"node": 1, "fail_at": 5, "rejoin_at": 12},
                                                    {"node": 1, "fail_at": 9}])"))) ==
        "faults[1]: node 1 is down already at step 9: faults[0] takes it down from step 5 until step 12");
  CHECK(faults_error(with_faults(m, json::parse(R"([{"node": 1, "fail_at": 5, "rejoin_at": 9},
                                                    {"node": 1, "fail_at": 9}])"))) ==
        "faults[1]: node 1 fails at step 9, the step faults[0] brings it back at: give one entry for the whole "
        "time it is down");
  CHECK(faults_error(with_faults(m, json::parse(R"([{"node": 2, "fail_at": 20}])"))) ==
        "faults[0].fail_at: step 20 is past the run (train.max_steps is 20: the last step is 19)");
  CHECK(faults_error(with_faults(m, json::parse(R"([{"node": 2, "join_at": 3, "fail_at": 5}])"))) ==
        "faults[0]: join_at describes a late joiner: give it alone, and the node's later failures in entries of "
        "their own");
  CHECK(faults_error(with_faults(m, json::parse(R"([{"node": 2}])"))) ==
        "faults[0]: give fail_at (the step the node fails at) or join_at (a late joiner)");
  CHECK(faults_error(with_faults(m, json::parse(R"([{"node": 2, "fail_at": -1}])"))).rfind("faults[0].fail_at: ", 0) ==
        0);
  json everyone = json::array();
  for (int node = 0; node < 4; ++node) everyone.push_back({{"node", node}, {"fail_at", 6}});
  CHECK(faults_error(with_faults(m, everyone)) ==
        "faults: no node is alive at step 6: the run needs at least one node at every step");
  everyone[0] = {{"node", 0}, {"fail_at", 2}, {"rejoin_at", 6}};
  CHECK(faults_error(with_faults(m, everyone)) ==
        "faults: at step 6 nodes come back while every node alive before fails: nobody is left to give them the "
        "run's state");
  json churn = m;
  churn["churn"] = {{"mtbf", "0 steps"}, {"downtime", "5 steps"}};
  CHECK(faults_error(churn) == "churn.mtbf: expected a positive number of steps, got \"0 steps\"");
  churn["churn"] = {{"mtbf", "50 steps"}, {"downtime", "-5 steps"}};
  CHECK(faults_error(churn) == "churn.downtime: expected a positive number of steps, got \"-5 steps\"");
  churn["churn"] = {{"mtbf", "2h"}, {"downtime", "5 steps"}};
  CHECK(faults_error(churn) ==
        "churn: give mtbf and downtime both in steps (\"500 steps\") or both as durations (\"2h\"), got \"2h\" and "
        "\"5 steps\"");
  churn["churn"] = {{"mtbf", "2h"}, {"downtime", "10min"}};
  CHECK(faults_error(churn) ==
        "churn: failures on the simulated clock need a fixed compute.step_time (such as \"50ms\"): with measured "
        "compute the clock, and so the failures, would change from run to run");
  churn["compute"] = {{"step_time", "50ms"}};
  CHECK(faults_error(churn) == "(no error)");
  churn["churn"] = {{"mtbf", "2h"}, {"downtime", "0s"}};
  CHECK(faults_error(churn) == "churn.downtime: expected a positive duration, got \"0s\"");
  churn["churn"] = {{"mtbf", "50 steps"}};
  CHECK(faults_error(churn).rfind("churn.downtime: ", 0) == 0);
  churn["churn"] = {{"mtbf", "1 step"}, {"downtime", "20 steps"}};
  CHECK(faults_error(churn).rfind("churn: no node is alive at step ", 0) == 0);
}

TEST_CASE("the schedule: intervals, events, node-steps lost, and churn drawn from the seed node by node", "[faults]") {
  json m = small_manifest(4);
  m = with_faults(m, json::parse(R"([{"node": 1, "fail_at": 5, "rejoin_at": 9}, {"node": 3, "join_at": 4},
                                     {"node": 2, "fail_at": 15}])"));
  runtime::sim::FaultSchedule schedule(parsed(m).failure_spec());
  CHECK(schedule.live_at(-1) == std::vector<int>{0, 1, 2, 3});
  CHECK(schedule.live_at(0) == std::vector<int>{0, 1, 2});
  CHECK(schedule.live_at(4) == std::vector<int>{0, 1, 2, 3});
  CHECK(schedule.live_at(5) == std::vector<int>{0, 2, 3});
  CHECK(schedule.live_at(9) == std::vector<int>{0, 1, 2, 3});
  CHECK(schedule.live_at(19) == std::vector<int>{0, 1, 3});
  CHECK(schedule.changes_at(0));
  CHECK_FALSE(schedule.changes_at(1));
  CHECK(schedule.changes().size() == 5);                       // steps 0, 4, 5, 9 and 15
  CHECK(schedule.change_at(0)->fails == std::vector<int>{3});  // absent until it joins
  CHECK(schedule.change_at(4)->returns == std::vector<int>{3});
  CHECK(schedule.late_joiner(3));
  CHECK(schedule.joins_late(3, 4));
  CHECK_FALSE(schedule.joins_late(1, 9));
  CHECK(schedule.back_at(1, 6) == std::optional<int64_t>(9));
  CHECK(schedule.back_at(2, 15) == std::nullopt);

  // Churn: the same seed draws the same schedule whatever the node count
  // beyond a node (each node has its own stream), another seed another.
  json churn = small_manifest(8);
  churn["train"]["max_steps"] = 400;
  churn["churn"] = {{"mtbf", "60 steps"}, {"downtime", "10 steps"}};
  runtime::sim::FaultSchedule a(parsed(churn).failure_spec()), b(parsed(churn).failure_spec());
  churn["nodes"] = 6;
  runtime::sim::FaultSchedule fewer(parsed(churn).failure_spec());
  churn["nodes"] = 8;
  churn["seed"] = 8;
  runtime::sim::FaultSchedule other(parsed(churn).failure_spec());
  bool differs = false;
  int64_t downs = 0;
  for (int64_t step = 0; step < 400; ++step) {
    CHECK(a.live_at(step) == b.live_at(step));
    for (int node = 0; node < 6; ++node) CHECK(a.live(node, step) == fewer.live(node, step));
    differs = differs || a.live_at(step) != other.live_at(step);
    downs += 8 - static_cast<int64_t>(a.live_at(step).size());
  }
  CHECK(differs);
  // About downtime / (mtbf + downtime) of the node-steps are lost.
  CHECK(a.changes().size() > 20);
  CHECK(static_cast<double>(downs) / (8 * 400) == Approx(10.0 / 70).margin(0.08));
}

TEST_CASE("collectives run over the live nodes: the same bits as a cluster of those nodes alone", "[faults]") {
  runtime::threads::AbortSignal abort;
  runtime::comm::InProcessGroup four(4, abort), three(3, abort);
  four.set_members({0, 2, 3});
  CHECK(four.live_count() == 3);
  auto values = [](int r) { return at::arange(5, at::kFloat) * (0.1f + static_cast<float>(r)) + 1.0f / 3; };
  std::vector<at::Tensor> from_four(4), from_three(3);
  std::vector<std::vector<std::vector<at::Tensor>>> gathered(4);
  auto run = [&](runtime::comm::InProcessGroup& group, const std::vector<int>& ranks, const std::vector<int>& as,
                 std::vector<at::Tensor>& out, bool gather) {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < ranks.size(); ++i) {
      threads.emplace_back([&, i] {
        auto comm = group.communicator(ranks[i]);
        at::Tensor t = values(as[i]);
        comm->all_reduce(t, sdk::ReduceOp::Avg);
        out[ranks[i]] = t;
        if (gather) gathered[ranks[i]] = comm->all_gather(std::vector<at::Tensor>{values(as[i])});
      });
    }
    for (auto& t : threads) t.join();
  };
  under_watchdog(60, [&] {
    run(four, {0, 2, 3}, {0, 2, 3}, from_four, true);
    run(three, {0, 1, 2}, {0, 2, 3}, from_three, false);
    return 0;
  });
  CHECK(at::equal(from_four[0], from_three[0]));
  CHECK(at::equal(from_four[3], from_three[0]));
  REQUIRE(gathered[2].size() == 3);  // the live nodes', in rank order
  CHECK(at::equal(gathered[2][1][0], values(2)));
  CHECK(at::equal(gathered[2][2][0], values(3)));
}

TEST_CASE("DDP whose node 3 of 4 fails at step 0 is bit for bit the 3-node run fed the same batches", "[faults]") {
  TempDir dir("faults-identity");
  // Each node owns its labels, so nodes 0 to 2 draw the same batches in both
  // runs; AdamW, so that the optimizer state matters too.
  json four = small_manifest(4);
  four["data"]["train"]["partition"] = {{"name", "labels"},
                                        {"nodes", {{"0", {0}}, {"1", {1}}, {"2", {2}}, {"3", {3}}}}};
  four["strategy"]["options"]["optimizer"] = {{"name", "adamw"}, {"lr", 0.01}};
  four["faults"] = json::parse(R"([{"node": 3, "fail_at": 0}])");
  four["network"] = {{"failure_timeout", "0s"}};
  four["compute"] = {{"step_time", "10ms"}};
  json three = four;
  three.erase("faults");
  three["nodes"] = 3;
  three["data"]["train"]["partition"]["nodes"].erase("3");
  run_watched(four, dir / "four");
  run_watched(three, dir / "three");
  CHECK(read_text(dir / "four" / "run" / "model.pt") == read_text(dir / "three" / "run" / "model.pt"));
  // Every value but bytes_sent, a mean over the run's nodes (4 and 3).
  auto validation4 = read_csv(dir / "four" / "run" / "validation.csv");
  auto validation3 = read_csv(dir / "three" / "run" / "validation.csv");
  REQUIRE(validation4.size() == 3);
  for (size_t i = 0; i < validation4.size(); ++i) {
    validation4[i].erase("bytes_sent");
    validation3[i].erase("bytes_sent");
    CHECK(validation4[i] == validation3[i]);
  }
  auto train4 = read_csv(dir / "four" / "run" / "train.csv");
  auto train3 = read_csv(dir / "three" / "run" / "train.csv");
  REQUIRE(train4.size() == train3.size());
  for (size_t i = 0; i < train4.size(); ++i) {
    CHECK(train4[i].at("train_loss") == train3[i].at("train_loss"));
    CHECK(train4[i].at("examples_trained") == train3[i].at("examples_trained"));
    CHECK(train4[i].at("live_nodes") == "3");
  }
}

TEST_CASE("without faults nothing changes, and before a failure a run is the run without it", "[faults]") {
  TempDir dir("faults-none");
  json m = small_manifest(4);
  m["compute"] = {{"step_time", "10ms"}};
  run_watched(m, dir / "plain");
  m["faults"] = json::array();
  run_watched(m, dir / "empty");
  for (const char* file : {"model.pt", "train.csv", "validation.csv", "comm.csv", "metrics.csv"}) {
    INFO(file);
    CHECK(read_text(dir / "plain" / "run" / file) == read_text(dir / "empty" / "run" / file));
  }
  CHECK_FALSE(fs::exists(dir / "plain" / "run" / "events.csv"));
  CHECK(read_text(dir / "plain" / "run" / "report.html").find("live-nodes-step") == std::string::npos);
  CHECK(read_lines(dir / "plain" / "run" / "train.csv").at(0).find("live_nodes") == std::string::npos);

  m["faults"] = json::parse(R"([{"node": 2, "fail_at": 12}])");
  run_watched(m, dir / "fails");
  const auto plain = read_lines(dir / "plain" / "run" / "train.csv");
  const auto fails = read_lines(dir / "fails" / "run" / "train.csv");
  for (size_t i = 1; i <= 12; ++i) CHECK(fails.at(i) == plain.at(i) + ",4");
  CHECK(fails.at(13) != plain.at(13) + ",4");
  CHECK(fails.at(13).substr(fails.at(13).rfind(',')) == ",3");
  // The report draws the live nodes.
  CHECK(read_text(dir / "fails" / "run" / "report.html").find("id=\"live-nodes-step\"") != std::string::npos);
}

TEST_CASE("a node that rejoins holds exactly its peers' state, and recovery bytes are the closed form", "[faults]") {
  TempDir dir("faults-recovery");
  // The MLP 32-32-4: 1,188 parameters in 4 tensors.
  const double P = 32 * 32 + 32 + 32 * 4 + 4;
  json m = checkpointed_manifest(4, 20);  // a checkpoint at the end: every node's state
  m["faults"] = json::parse(R"([{"node": 2, "fail_at": 5, "rejoin_at": 11}, {"node": 3, "join_at": 3}])");

  SECTION("DDP: parameters and AdamW moments") {
    m["strategy"]["options"]["optimizer"] = {{"name", "adamw"}, {"lr", 0.01}};
    auto result = run_watched(m, dir / "ddp");
    const fs::path last = dir / "ddp" / "run" / "checkpoints" / "step-20";
    const auto peer = checkpoint_tensors(last, 0, 20);
    for (int rank : {1, 2, 3}) {
      INFO("node " << rank);
      CHECK(bit_identical(peer, checkpoint_tensors(last, rank, 20)));
    }
    REQUIRE(result.faults);
    // Parameters, exp_avg and exp_avg_sq in fp32 and a 0-D int64 step per
    // tensor, to node 2 at step 11; node 3 joins at step 3, after 3 steps.
    CHECK(result.faults->recovery_bytes == 2 * (3 * 4 * P + 4 * 8));
    CHECK(result.faults->failures == 1);
    CHECK(result.faults->rejoins == 1);
    CHECK(result.faults->late_joins == 1);
    CHECK(result.faults->node_steps_lost == 6 + 3);
    CHECK(result.examples_trained == (4 * 20 - 9) * 16);
  }
  SECTION("DiLoCo: the master copy and the outer momentum; the inner steps restart from the master") {
    m["strategy"] = {{"plugin", "diloco"}, {"options", {{"H", 4}, {"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}}}};
    auto result = run_watched(m, dir / "diloco");
    const fs::path last = dir / "diloco" / "run" / "checkpoints" / "step-20";
    auto shared = [](std::map<std::string, at::Tensor> all) {
      std::map<std::string, at::Tensor> out;
      for (auto& [name, t] : all) {
        if (name.rfind("strategy.module0.", 0) == 0) out[name] = t;
      }
      return out;
    };
    const auto peer = shared(checkpoint_tensors(last, 0, 20));
    REQUIRE(peer.size() == 9);  // 4 master tensors, 4 momentum buffers, the step of the last outer step
    for (int rank : {1, 2, 3}) {
      INFO("node " << rank);
      CHECK(bit_identical(peer, shared(checkpoint_tensors(last, rank, 20))));
    }
    // After steps 3 and 7, the last of 20 ends a round: every node holds the master.
    const auto model0 = checkpoint_tensors(last, 0, 20);
    CHECK(at::equal(model0.at("model.layers.0.weight"), model0.at("strategy.module0.master.0")));
    // Node 3 joins at step 3, before the first outer step: the master alone.
    // Node 2 rejoins at step 11: the master and the momentum.
    REQUIRE(result.faults);
    CHECK(result.faults->recovery_bytes == 4 * P + 2 * 4 * P);
    const auto events = read_csv(dir / "diloco" / "run" / "events.csv");
    REQUIRE(events.size() == 3);
    CHECK(events[0].at("step") == "3");
    CHECK(events[0].at("event") == "join");
    CHECK(events[1].at("event") == "fail");
    CHECK(events[1].at("detail") == "down until step 11");
    CHECK(events[2].at("node") == "2");
    CHECK(events[2].at("detail") == "state from node 0: 9.50 kB in 10.1ms");
  }
}

TEST_CASE("every built-in strategy trains through churn, reproducibly, with any parallelism, and resumes exactly",
          "[faults]") {
  for (const auto& [plugin, options] : builtin_strategies()) {
    SECTION(plugin) {
      TempDir dir("churn-" + plugin);
      json m = checkpointed_manifest(6, 5);
      m["strategy"] = {{"plugin", plugin}, {"options", options}};
      m["eval"]["interval"] = 6;
      m["churn"] = {{"mtbf", "8 steps"}, {"downtime", "3 steps"}};
      m["faults"] = json::parse(R"([{"node": 0, "fail_at": 4, "rejoin_at": 9}])");  // the reporter changes
      m["train"]["max_steps"] = 24;
      m["parallelism"] = 1;
      run_watched(m, dir / "p1");
      m["parallelism"] = 3;
      run_watched(m, dir / "p3" / "run");
      const fs::path p1 = dir / "p1" / "run", p3 = dir / "p3" / "run" / "run";
      require_same_run(p1, p3);
      const auto events = read_csv(p1 / "events.csv");
      CHECK(events.size() > 6);
      CHECK(read_text(p1 / "events.csv") == read_text(p3 / "events.csv"));
      // Stopped at 13, resumed to 24: the same run.
      m["train"]["max_steps"] = 13;
      under_watchdog(120, [&] { return train_into(m, dir / "parts"); });
      under_watchdog(120, [&] { return resume_in(dir / "parts", {"train.max_steps=24"}); });
      require_same_run(p1, dir / "parts");
      const json summary = json::parse(read_text(p1 / "summary.json"));
      CHECK(summary.at("faults").at("failures").get<int64_t>() > 3);
      CHECK(json::parse(read_text(dir / "parts" / "summary.json")).at("faults") == summary.at("faults"));
    }
  }
}

TEST_CASE("churn on the simulated clock: reproducible with any parallelism, and resumed exactly", "[faults]") {
  TempDir dir("churn-timed");
  json m = timed_churn_manifest();
  m["parallelism"] = 1;
  run_watched(m, dir / "p1");
  m["parallelism"] = 3;
  run_watched(m, dir / "p3" / "run");
  const fs::path p1 = dir / "p1" / "run";
  require_same_run(p1, dir / "p3" / "run" / "run");
  const auto events = read_csv(p1 / "events.csv");
  REQUIRE(events.size() > 4);
  CHECK(events[0].at("event") == "fail");
  CHECK(events[0].at("detail") == "down for 300ms");
  // Each node is down 300 ms at a time: about 4 or 5 steps of this run.
  const auto train = read_csv(p1 / "train.csv");
  int64_t lost = 0;
  for (const auto& row : train) lost += 6 - std::stoi(row.at("live_nodes"));
  const json summary = json::parse(read_text(p1 / "summary.json"));
  CHECK(summary.at("faults").at("node_steps_lost").get<int64_t>() == lost);
  CHECK(lost > 10);
  // Stopped at 17, resumed to 40: the same run.
  m["train"]["max_steps"] = 17;
  under_watchdog(120, [&] { return train_into(m, dir / "parts"); });
  under_watchdog(120, [&] { return resume_in(dir / "parts", {"train.max_steps=40"}); });
  require_same_run(p1, dir / "parts");
}

TEST_CASE("churn on the clock with an mtbf below a step is refused, and a step draws a bounded number of failures",
          "[faults]") {
  json m = small_manifest(3);
  m["compute"] = {{"step_time", "50ms"}};
  m["churn"] = {{"mtbf", "1ns"}, {"downtime", "1ns"}};
  CHECK(faults_error(m) ==
        "churn.mtbf: \"1ns\" is shorter than one step of the fastest node (50ms, from compute.step_time): every "
        "node would fail within every step; give at least 50ms");
  m["churn"] = {{"mtbf", "30ms"}, {"downtime", "1ns"}};
  CHECK(faults_error(m).rfind("churn.mtbf: \"30ms\" is shorter than one step of the fastest node (50ms, ", 0) == 0);
  // A node twice as fast has steps of 25 ms.
  m["compute"]["speed"] = {{"1", 2.0}};
  CHECK(faults_error(m) == "(no error)");
  m["churn"] = {{"mtbf", "20ms"}, {"downtime", "1ns"}};
  CHECK(faults_error(m) ==
        "churn.mtbf: \"20ms\" is shorter than one step of the fastest node (25ms, from compute.step_time and "
        "compute.speed): every node would fail within every step; give at least 25ms");
  m["churn"] = {{"mtbf", "50ms"}, {"downtime", "1ns"}};
  m["compute"].erase("speed");
  REQUIRE(faults_error(m) == "(no error)");

  // A clock that jumps a million mtbfs in one step (a huge latency) stops
  // with an error naming the option instead of drawing for minutes.
  runtime::sim::TimedChurn churn(parsed(m).failure_spec());
  CHECK_FALSE(churn.down(0, 0.0));
  const auto started = std::chrono::steady_clock::now();
  try {
    churn.down(1, 1e9);
    FAIL("no error");
  } catch (const sdk::ConfigError& e) {
    CHECK(std::string(e.what()).rfind("churn.mtbf: 50ms draws more than 1000000 failures of node 1 in one step", 0) ==
          0);
  }
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
}

}  // namespace exogym::test
