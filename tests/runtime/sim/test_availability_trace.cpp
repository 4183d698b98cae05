// Availability traces (docs/simulation.md#availability-traces): the file's
// format and every fault in it named by file and line, who a round may draw
// over many rounds, the trace's speeds and bandwidths on the simulated
// clock, and runs with a trace reproduced and resumed exactly.
#include <algorithm>
#include <fstream>
#include <set>

#include "checkpoint_fixtures.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/sim/availability_trace.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using exogym::test::parse_error;
using exogym::test::write_bytes;
using nlohmann::json;

namespace {

// The error parsing a manifest gives, or "(no error)".
// FedAvg in rounds of 2 steps of 100 ms on `nodes` nodes, over a network so
// fast that a round starts at 0.2 s × its index (to within nanoseconds):
// the test knows each round's start time. grad_norm (max_norm) lists in
// metrics.csv the nodes that took each step.
json fedavg_manifest(int nodes, int per_round, const std::string& trace) {
  json m = small_manifest(nodes);
  m["compute"] = {{"step_time", "100ms"}};
  m["network"] = {{"bandwidth", "1000TB/s"}, {"latency", "0s"}};
  m["strategy"] = {{"plugin", "fedavg"},
                   {"options", {{"H", 2}, {"max_norm", 10.0}, {"optimizer", {{"name", "sgd"}, {"lr", 0.05}}}}}};
  m["train"]["max_steps"] = 24;
  m["participation"] = {{"per_round", per_round}};
  if (!trace.empty()) m["participation"]["trace"] = trace;
  return m;
}

// Whether client c is available from row j on (at 0.1 + 0.2 j s, half a
// round after round j's start): about three in four, and at j = 5 only
// clients 0 and 1, fewer than a round draws.
bool available(int c, int j) { return j == 5 ? c < 2 : (c * 31 + j * 17 + c * j) % 4 != 0; }

// Round k's start is 0.2 k s: round 0 is before every row (all available),
// round k >= 1 reads row k - 1.
bool available_in_round(int c, int64_t k) { return k == 0 || available(c, static_cast<int>(k - 1)); }

std::string varying_trace(int clients, int rows) {
  std::string text = "client,time,available,speed,bandwidth\n";
  for (int j = 0; j < rows; ++j) {
    for (int c = 0; c < clients; ++c) {
      text += std::to_string(c) + "," + std::to_string(0.1 + 0.2 * j) + "," + (available(c, j) ? "1" : "0") + ",,\n";
    }
  }
  return text;
}

// The nodes that took each step, from metrics.csv's grad_norm rows.
std::map<int64_t, std::set<int>> steps_taken(const fs::path& run) {
  std::map<int64_t, std::set<int>> taken;
  for (const auto& row : read_csv(run / "metrics.csv")) {
    if (row.at("name") == "grad_norm") taken[std::stoll(row.at("step"))].insert(std::stoi(row.at("node")));
  }
  return taken;
}

}  // namespace

TEST_CASE("availability trace: a client's state is its last row at or before the time", "[participation][trace]") {
  TempDir dir("trace-read");
  write_bytes(dir / "t.csv",
              "client, time ,available,bandwidth,speed\n"  // any order, spaces around names
              "0,0,1,,\n"
              "1,5,0,2000000,0.5\n"
              "\n"
              "0,10,0,,\n"
              "0,10,1,1000,\n"  // the later row at one time wins
              "1,20,1,,2\r\n");
  const auto trace = runtime::sim::AvailabilityTrace::read(dir / "t.csv", 2, "participation.trace");
  CHECK(trace.rows() == 5);
  CHECK(trace.at(0, 0).available);
  CHECK_FALSE(trace.at(0, 0).speed);
  CHECK(trace.at(0, 10).available);
  CHECK(trace.at(0, 10).bandwidth == 1000.0);
  // Before its first row, a client is available with the manifest's factors.
  CHECK(trace.at(1, 4.99).available);
  CHECK_FALSE(trace.at(1, 4.99).speed);
  CHECK_FALSE(trace.at(1, 5).available);
  CHECK(trace.at(1, 5).speed == 0.5);
  CHECK(trace.at(1, 5).bandwidth == 2e6);
  CHECK(trace.at(1, 19).speed == 0.5);
  CHECK(trace.at(1, 1e9).speed == 2.0);
  CHECK_FALSE(trace.at(1, 1e9).bandwidth);
  CHECK(trace.available({0, 1}, 7) == std::vector<int>{0});
}

TEST_CASE("availability trace: bad files are refused naming the file and line", "[participation][trace]") {
  TempDir dir("trace-bad");
  const std::string file = (dir / "t.csv").string();
  auto error_for = [&](const std::string& text) {
    write_bytes(dir / "t.csv", text);
    return parse_error(fedavg_manifest(2, 1, "t.csv"), dir.path());
  };
  const std::string head = "client,time,available,speed,bandwidth\n";
  const std::string at = "participation.trace: " + file;
  CHECK(error_for(head + "0,0,1,,\n1,0,1,,\n") == "(no error)");
  // Relative to the manifest's folder; config.json records the absolute path.
  CHECK(runtime::manifest::parse_manifest(fedavg_manifest(2, 1, "t.csv"), dir.path(), "test")
            .runs.at(0)
            .resolved.at("participation")
            .at("trace") == file);
  CHECK(error_for("client,time,available,speed,bandwidth,zone\n") ==
        at + ":1: unknown column \"zone\"; the header is client,time,available,speed,bandwidth");
  CHECK(error_for("client,time,available,speed\n0,0,1,\n") ==
        at + ":1: missing column \"bandwidth\"; the header is client,time,available,speed,bandwidth");
  CHECK(error_for("client,time,time,available,speed,bandwidth\n") == at + ":1: column \"time\" appears twice");
  CHECK(error_for(head + "0,0,1,,\n1,0,1\n") == at + ":3: expected 5 fields, got 3");
  CHECK(error_for(head + "0,soon,1,,\n") == at + ":2: time: expected a number, got \"soon\"");
  CHECK(error_for(head + "0,,1,,\n") == at + ":2: time: expected a number, got \"\"");
  CHECK(error_for(head + "0,-1,1,,\n") == at + ":2: time: expected seconds at or after 0, got -1");
  CHECK(error_for(head + "x,0,1,,\n") == at + ":2: client: expected a number, got \"x\"");
  CHECK(error_for(head + "0,0,1,,\n2,0,1,,\n") == at + ":3: client 2 is not in a run of 2 clients (0 to 1)");
  CHECK(error_for(head + "0.5,0,1,,\n") == at + ":2: client 0.5 is not in a run of 2 clients (0 to 1)");
  CHECK(error_for(head + "0,0,yes,,\n") == at + ":2: available: expected 0 or 1, got \"yes\"");
  CHECK(error_for(head + "0,0,1,0,\n") == at + ":2: speed: expected a positive number or nothing, got 0");
  CHECK(error_for(head + "0,0,1,,fast\n") == at + ":2: bandwidth: expected a number, got \"fast\"");
  CHECK(error_for(head + "0,0,1,,\n1,0,1,,\n0,10,1,,\n0,9.5,0,,\n") ==
        at + ":5: time 9.5 goes back for client 0: its row on line 4 is at 10; a client's times must not "
             "decrease");
  CHECK(error_for(head + "0,0,1,,\n") ==
        at + ": client 1 has no row; the trace must name every client of the run (0 to 1)");
  CHECK(error_for("") == at + ": the trace is empty; it needs a header line");
  CHECK(parse_error(fedavg_manifest(2, 1, "absent.csv"), dir.path()) ==
        "participation.trace: " + (dir / "absent.csv").string() + ": missing");
  // Availability on the clock needs a clock that does not depend on the machine.
  write_bytes(dir / "t.csv", head + "0,0,1,,\n1,0,1,,\n");
  json measured = fedavg_manifest(2, 1, "t.csv");
  measured["compute"] = json::object();
  CHECK(parse_error(measured, dir.path())
            .rfind("participation.trace: a trace is read on the simulated clock, which "
                   "needs a fixed compute.step_time",
                   0) == 0);
}

TEST_CASE(
    "availability trace: over 12 rounds no client away at a round's start is drawn, and a round with fewer available "
    "than per_round draws them all",
    "[participation][trace]") {
  TempDir dir("trace-rounds");
  write_bytes(dir / "trace.csv", varying_trace(8, 12));
  const auto result = run_json(fedavg_manifest(8, 4, (dir / "trace.csv").string()), dir / "with");
  const fs::path run = dir / "with" / "run";
  const auto taken = steps_taken(run);
  REQUIRE(taken.size() == 24);
  const auto train = read_csv(run / "train.csv");
  REQUIRE(train.size() == 24);
  for (const auto& [step, nodes] : taken) {
    const int64_t round = step / 2;
    INFO("step " << step << ", round " << round);
    size_t available_now = 0;
    for (int c = 0; c < 8; ++c) available_now += available_in_round(c, round);
    for (int node : nodes) CHECK(available_in_round(node, round));
    CHECK(nodes.size() == std::min<size_t>(4, available_now));
    CHECK(train.at(static_cast<size_t>(step)).at("live_nodes") == std::to_string(nodes.size()));
  }
  CHECK(taken.at(12) == std::set<int>{0, 1});  // round 6 reads row 5: only two available

  // Without the trace the same seed draws clients the trace has away.
  run_json(fedavg_manifest(8, 4, ""), dir / "without");
  int away_drawn = 0;
  for (const auto& [step, nodes] : steps_taken(dir / "without" / "run")) {
    for (int node : nodes) away_drawn += !available_in_round(node, step / 2);
  }
  CHECK(away_drawn > 0);
  CHECK(result.participation->node_steps_sat_out > 4 * 24);  // more than the 4 undrawn of 8 per step
}

TEST_CASE("availability trace: speed and bandwidth rows change the simulated clock from the next round on",
          "[participation][trace]") {
  TempDir dir("trace-factors");
  // Client 1 works at half speed from 0.3 s on: rounds 0 and 1 (0 to 0.4 s)
  // at full speed, the next two at its pace: 0.2 + 0.2 + 0.4 + 0.4 s.
  write_bytes(dir / "slow.csv", "client,time,available,speed,bandwidth\n0,0,1,,\n1,0.3,1,0.5,\n2,0,1,,\n3,0,1,,\n");
  json m = fedavg_manifest(4, 4, (dir / "slow.csv").string());
  m["train"]["max_steps"] = 8;
  run_json(m, dir / "slow");
  json summary = json::parse(read_text(dir / "slow" / "run" / "summary.json"));
  CHECK(summary.at("simulated").at("time_s").get<double>() == Approx(1.2).epsilon(1e-6));
  CHECK(summary.at("communication").at("per_node").at(1).at("speed") == 0.5);
  CHECK(summary.at("communication").at("per_node").at(0).at("speed") == 1.0);
  run_json(fedavg_manifest(4, 4, ""), dir / "plain");  // 24 steps of 0.1 s without the trace
  CHECK(json::parse(read_text(dir / "plain" / "run" / "summary.json")).at("simulated").at("time_s").get<double>() ==
        Approx(2.4).epsilon(1e-6));

  // Client 2's link at 1 MB/s from the start paces every round's
  // all-reduce, as a cluster whose links are all that slow.
  write_bytes(dir / "narrow.csv", "client,time,available,speed,bandwidth\n0,0,1,,\n1,0,1,,\n2,0,1,,1000000\n3,0,1,,\n");
  m["participation"]["trace"] = (dir / "narrow.csv").string();
  run_json(m, dir / "narrow");
  json narrow = json::parse(read_text(dir / "narrow" / "run" / "summary.json"));
  json slow_links = fedavg_manifest(4, 4, "");
  slow_links["train"]["max_steps"] = 8;
  slow_links["network"]["bandwidth"] = "1MB/s";
  run_json(slow_links, dir / "slow-links");
  json expected = json::parse(read_text(dir / "slow-links" / "run" / "summary.json"));
  const double seconds = expected.at("simulated").at("time_s");
  CHECK(seconds > 0.8 + 1e-3);  // the all-reduces take measurable time
  CHECK(narrow.at("simulated").at("time_s").get<double>() == Approx(seconds).epsilon(1e-9));
  CHECK(narrow.at("communication").at("per_node").at(2).at("bandwidth_bytes_per_s") == 1e6);
}

TEST_CASE("availability trace: a run is the same with any parallelism and resumes inside a round exactly",
          "[participation][trace]") {
  TempDir dir("trace-resume");
  write_bytes(dir / "trace.csv", varying_trace(8, 12));
  json m = fedavg_manifest(8, 3, (dir / "trace.csv").string());
  m["strategy"]["options"]["optimizer"] = {{"name", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}};
  m["checkpoint"] = {{"interval", 5}};
  m["parallelism"] = 1;
  run_json(m, dir / "p1");
  m["parallelism"] = 3;
  run_json(m, dir / "p3");
  const fs::path whole = dir / "p1" / "run";
  require_same_run(whole, dir / "p3" / "run");
  // Stopped after 15 steps, inside round 7 (steps 14 and 15), resumed to 24.
  m["train"]["max_steps"] = 15;
  train_into(m, dir / "parts");
  resume_in(dir / "parts", {"train.max_steps=24"});
  require_same_run(whole, dir / "parts");
}

}  // namespace exogym::test
