// Exact communication accounting and the simulated network clock: byte counts
// against closed forms for every strategy, simulated time against the
// alpha-beta model, stragglers, units, time to target.
#include <ATen/ATen.h>

#include <cmath>
#include <string>
#include <vector>

#include "demo/dct.h"
#include "exogym/modules/aggregation/index_selector.h"
#include "exogym/runtime/command/comparison.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/sim/network_model.h"
#include "exogym/runtime/util/units.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::runtime::sim::NetworkModel;
using exogym::test::read_csv;
using exogym::test::read_text;
using exogym::test::run_json;
using exogym::test::small_manifest;
using exogym::test::TempDir;
using nlohmann::json;
namespace rt = exogym::runtime;
using exogym::test::kSmallMlpParameters;

namespace {

// small_manifest's MLP, 32 -> 32 -> 4: its trainable tensors and their sizes.
const std::vector<std::vector<int64_t>> kShapes = {{32, 32}, {32}, {4, 32}, {4}};
constexpr double kParamBytes = 4 * kSmallMlpParameters;  // float32
constexpr int kSteps = 20;

json manifest_with(int nodes, const std::string& strategy, json options) {
  json m = small_manifest(nodes);
  if (strategy != "demo" && !options.contains("optimizer")) options["optimizer"] = {{"name", "sgd"}, {"lr", 0.1}};
  m["strategy"] = {{"plugin", strategy}, {"options", options}};
  return m;
}

json run_summary(const fs::path& dir) { return json::parse(read_text(dir / "run" / "summary.json")); }

// Every node's strategy bytes in summary.json, and the totals, equal
// `per_node` (a closed form); train.csv's last row says the same.
void check_bytes(const fs::path& dir, int nodes, double per_node) {
  const json summary = run_summary(dir);
  const json& comm = summary["communication"];
  CHECK(comm["bytes_sent_per_node"].get<double>() == Approx(per_node).epsilon(1e-12));
  CHECK(comm["bytes_sent_total"].get<double>() == Approx(per_node * nodes).epsilon(1e-12));
  REQUIRE(comm["per_node"].size() == static_cast<size_t>(nodes));
  for (const auto& node : comm["per_node"]) {
    CHECK(node["bytes_sent"].get<double>() == Approx(per_node).epsilon(1e-12));
    CHECK(node["bytes_received"].get<double>() == Approx(per_node).epsilon(1e-12));
  }
  const auto train = read_csv(dir / "run" / "train.csv");
  REQUIRE(train.size() == static_cast<size_t>(kSteps));
  CHECK(std::stod(train.back().at("bytes_sent")) == Approx(per_node).epsilon(1e-12));
}

// Ring all-reduce of S bytes: 2(K-1)/K * S per node.
double ring(double bytes, int K) { return 2.0 * (K - 1) / K * bytes; }

}  // namespace

TEST_CASE("accounting: units parse to bytes/s and seconds, and bad ones name the field", "[accounting]") {
  CHECK(rt::util::parse_bandwidth("1Gbit/s", "b") == 1.25e8);
  CHECK(rt::util::parse_bandwidth("100 Mbit/s", "b") == 1.25e7);
  CHECK(rt::util::parse_bandwidth("10Gbps", "b") == 1.25e9);
  CHECK(rt::util::parse_bandwidth("1.5GB/s", "b") == 1.5e9);
  CHECK(rt::util::parse_bandwidth("800 kB/s", "b") == 8e5);
  CHECK(rt::util::parse_duration("10ms", "l") == Approx(0.010));
  CHECK(rt::util::parse_duration("0.5 s", "l") == 0.5);
  CHECK(rt::util::parse_duration("250us", "l") == Approx(250e-6));
  CHECK(rt::util::parse_duration("2min", "l") == 120);
  CHECK(rt::util::parse_duration("0ms", "l") == 0);

  TempDir dir("units");
  auto error_of = [&](const std::string& field, const json& value) {
    json m = small_manifest(2);
    json* target = &m;
    std::string rest = field;
    for (size_t dot; (dot = rest.find('.')) != std::string::npos; rest = rest.substr(dot + 1))
      target = &(*target)[rest.substr(0, dot)];
    (*target)[rest] = value;
    try {
      rt::manifest::parse_manifest(m, dir.path(), "test");
    } catch (const exogym::sdk::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("network.bandwidth", "1 Gbit"),
             Catch::StartsWith("network.bandwidth: ") && Catch::Contains("not a rate") && Catch::Contains("Gbit/s"));
  CHECK_THAT(error_of("network.bandwidth", "fast"),
             Catch::StartsWith("network.bandwidth: expected a bandwidth such as \"1Gbit/s\", got \"fast\""));
  CHECK_THAT(error_of("network.bandwidth", "-1Gbit/s"),
             Catch::StartsWith("network.bandwidth: expected a positive bandwidth"));
  CHECK_THAT(error_of("network.bandwidth", "0Gbit/s"), Catch::StartsWith("network.bandwidth: expected a positive"));
  CHECK_THAT(error_of("network.bandwidth", 1000),
             Catch::StartsWith("network.bandwidth: expected a bandwidth with a unit"));
  CHECK_THAT(error_of("network.latency", "10"),
             Catch::StartsWith("network.latency: ") && Catch::Contains("unit is missing"));
  CHECK_THAT(error_of("network.latency", "-5ms"),
             Catch::StartsWith("network.latency: expected a non-negative duration"));
  CHECK_THAT(error_of("network.latency", "10 parsecs"), Catch::Contains("unknown unit \"parsecs\""));
  CHECK_THAT(error_of("network.nodes.1.bandwidth", "1 Mbit"), Catch::StartsWith("network.nodes.1.bandwidth: "));
  CHECK_THAT(error_of("network.nodes.5.latency", "1ms"),
             Catch::StartsWith("network.nodes.5: node 5 does not exist: the run has 2 nodes"));
  CHECK_THAT(error_of("network.speed", "1Gbit/s"), Catch::StartsWith("network.speed: unknown option"));
  CHECK_THAT(error_of("compute.step_time", "fast"), Catch::StartsWith("compute.step_time: expected a duration"));
  CHECK_THAT(error_of("compute.step_time", "0s"),
             Catch::StartsWith("compute.step_time: expected \"measured\" or a positive"));
  CHECK_THAT(error_of("compute.speed.1", -0.5), Catch::StartsWith("compute.speed.1: expected a positive speed factor"));
  CHECK_THAT(error_of("compute.speed.x", 0.5), Catch::StartsWith("compute.speed.x: expected a node rank"));
  CHECK_THAT(error_of("eval.target_loss", "low"), Catch::StartsWith("eval.target_loss: expected a number"));
  CHECK(error_of("network.nodes.1.bandwidth", "100Mbit/s") == "no error");
}

TEST_CASE("accounting: collective traffic and time follow the documented algorithms", "[accounting]") {
  // Ring all-reduce, pipelined-chain broadcast, ring all-gather.
  CHECK(rt::sim::all_reduce_traffic(1000, 4).sent == 1500);
  CHECK(rt::sim::all_reduce_traffic(1000, 1).sent == 0);
  CHECK(rt::sim::all_reduce_total_sent(1000, 4) == 6000);
  CHECK(rt::sim::broadcast_traffic(1000, 4, 2, 2).sent == 1000);  // the root
  CHECK(rt::sim::broadcast_traffic(1000, 4, 2, 2).received == 0);
  CHECK(rt::sim::broadcast_traffic(1000, 4, 1, 2).sent == 0);  // the end of the chain 2 -> 3 -> 0 -> 1
  CHECK(rt::sim::broadcast_traffic(1000, 4, 1, 2).received == 1000);
  CHECK(rt::sim::broadcast_total_sent(1000, 4) == 3000);
  const std::vector<double> uneven = {100, 200, 300};
  CHECK(rt::sim::all_gather_traffic(uneven, 0).sent == 400);      // everything but node 1's block
  CHECK(rt::sim::all_gather_traffic(uneven, 0).received == 500);  // everything but its own
  CHECK(rt::sim::all_gather_total_sent(uneven) == 1200);

  const NetworkModel net(4, {1e6, 0.01}, {{3, {5e5, 0.02}}});
  CHECK(net.bottleneck().bandwidth == 5e5);  // the slowest link sets the pace
  CHECK(net.bottleneck().latency == 0.02);
  CHECK(net.link(0).bandwidth == 1e6);
  CHECK(net.all_reduce_time(4000) == Approx(6 * (0.02 + 1000 / 5e5)));
  CHECK(net.broadcast_time(4000) == Approx(3 * 0.02 + 4000 / 5e5));
  CHECK(net.all_gather_time(3000) == Approx(3 * 0.02 + 3000 / 5e5));
  CHECK(NetworkModel(5, {1e6, 0.01}).barrier_time() == Approx(3 * 0.01));  // ceil(log2 5) rounds
  CHECK(NetworkModel(1, {1e6, 0.01}).all_reduce_time(4000) == 0);
}

TEST_CASE("accounting: DDP sends a ring all-reduce of every gradient every step", "[accounting]") {
  TempDir dir("bytes-ddp");
  const int K = 4;
  run_json(manifest_with(K, "allreduce", json::object()), dir.path());
  check_bytes(dir.path(), K, kSteps * ring(kParamBytes, K));
  const json summary = run_summary(dir.path());
  CHECK(summary["communication"]["ratio_to_ddp"].get<double>() == Approx(1.0).epsilon(1e-12));
  CHECK(summary["communication"]["collectives_per_node"] == kSteps);

  // comm.csv: one strategy all_reduce row per step, all nodes together.
  int strategy_rows = 0;
  for (const auto& row : read_csv(dir / "run" / "comm.csv")) {
    if (row.at("source") != "strategy") continue;
    ++strategy_rows;
    CHECK(row.at("collective") == "all_reduce");
    CHECK(row.at("step") == std::to_string(strategy_rows));
    CHECK(row.at("calls") == "1");
    CHECK(std::stod(row.at("bytes_sent")) == Approx(K * ring(kParamBytes, K)));
  }
  CHECK(strategy_rows == kSteps);

  // The runtime's own traffic is counted apart: the initial broadcast, three
  // evaluations (steps 0, 10, 20: the average of the parameters plus a packed
  // result of 2 x (loss + accuracy) doubles) and the final model's average.
  const double runtime_total =
      (K - 1) * kParamBytes + 3 * (2.0 * (K - 1) * kParamBytes + 2.0 * (K - 1) * 4 * 8) + 2.0 * (K - 1) * kParamBytes;
  CHECK(summary["communication"]["runtime_bytes_sent_total"].get<double>() == Approx(runtime_total).epsilon(1e-12));
}

TEST_CASE("accounting: DiLoCo and FedAvg send the parameters every H steps", "[accounting]") {
  TempDir dir("bytes-local");
  const int K = 4;
  SECTION("diloco, H = 5: 4 rounds") {
    run_json(manifest_with(K, "diloco", {{"H", 5}}), dir.path());
    check_bytes(dir.path(), K, (kSteps / 5) * ring(kParamBytes, K));
    CHECK(run_summary(dir.path())["communication"]["ratio_to_ddp"].get<double>() == Approx(0.2));
  }
  SECTION("fedavg, H = 2: 10 rounds") {
    run_json(manifest_with(K, "fedavg", {{"H", 2}}), dir.path());
    check_bytes(dir.path(), K, (kSteps / 2) * ring(kParamBytes, K));
  }
  SECTION("fedavg islands of 2, H = 4: a ring over the island per round, K / 2 times fewer than all_gather") {
    run_json(manifest_with(K, "fedavg", {{"H", 4}, {"island_size", 2}}), dir.path());
    // 2(2-1)/2 S = S per node per round (the reference's all_gather: (K-1) S).
    check_bytes(dir.path(), K, (kSteps / 4) * ring(kParamBytes, 2));
    for (const auto& row : read_csv(dir / "run" / "comm.csv")) {
      if (row.at("source") == "strategy") CHECK(row.at("collective") == "group_all_reduce");
    }
  }
}

TEST_CASE("accounting: SPARTA sends exactly the selected values, whose count the seeded masks fix", "[accounting]") {
  TempDir dir("bytes-sparta");
  const int K = 3;
  const double p = 0.1;
  json m = manifest_with(K, "sparta", {{"p", p}});
  run_json(m, dir.path());
  // The same selector with the run's seed draws the same masks.
  auto selector = exogym::modules::make_index_selector("random", p, m["seed"].get<uint64_t>());
  double selected = 0;
  for (int call = 0; call < kSteps; ++call) {
    for (size_t i = 0; i < kShapes.size(); ++i) {
      int64_t numel = 1;
      for (auto d : kShapes[i]) numel *= d;
      selected += static_cast<double>(selector->select(i, numel, call).numel());
    }
  }
  REQUIRE(selected > 0.05 * kSteps * kSmallMlpParameters);  // about p of every tensor
  REQUIRE(selected < 0.15 * kSteps * kSmallMlpParameters);
  check_bytes(dir.path(), K, ring(4 * selected, K) /* summed over steps: the ring is linear */);
}

TEST_CASE("accounting: DeMo sends chunks x top-k x (index + value bytes) per tensor, to K-1 nodes", "[accounting]") {
  TempDir dir("bytes-demo");
  const int K = 4, topk = 8, chunk = 16;
  run_json(manifest_with(K, "demo", {{"compression_topk", topk}, {"compression_chunk", chunk}, {"lr", 0.01}}),
           dir.path());
  using exogym::modules::demo::chunk_size;
  double message = 0;  // one node's bytes per step
  for (const auto& shape : kShapes) {
    // 2-D R x C: (R/n1)(C/n2) tiles of n1 x n2; 1-D N: N/n rows of n.
    int64_t chunks = 1, elements = 1;
    for (auto d : shape) {
      const int64_t n = chunk_size(d, chunk);
      chunks *= d / n;
      elements *= n;
    }
    message += static_cast<double>(chunks * std::min<int64_t>(topk, elements)) * (8 /* int64 index */ + 4 /* float */);
  }
  CHECK(message == (4 * 8 + 2 * 8 + 2 * 8 + 1 * 4) * 12);  // 32x32: 2x2 tiles, 32: 2 rows, 4x32: 2 tiles, 4: 1 row
  check_bytes(dir.path(), K, kSteps * (K - 1) * message);
}

TEST_CASE("accounting: simulated time with a fixed step time equals the closed form", "[accounting]") {
  TempDir dir("sim-time");
  const int K = 4;
  const double step = 0.05, bandwidth = 1e8 / 8, latency = 0.002;  // 100 Mbit/s
  const double all_reduce = 2 * (K - 1) * (latency + kParamBytes / K / bandwidth);
  json m = manifest_with(K, "allreduce", json::object());
  m["network"] = {{"bandwidth", "100Mbit/s"}, {"latency", "2ms"}};
  m["compute"] = {{"step_time", "50ms"}};
  double expected = 0;
  SECTION("DDP: every step computes, then all-reduces") {
    run_json(m, dir.path());
    expected = kSteps * (step + all_reduce);
  }
  SECTION("DiLoCo H = 4: five all-reduces") {
    m["strategy"] = {{"plugin", "diloco"}, {"options", {{"H", 4}}}};
    run_json(m, dir.path());
    expected = kSteps * step + 5 * all_reduce;
  }
  const json sim = run_summary(dir.path())["simulated"];
  CHECK(sim["time_s"].get<double>() == Approx(expected).epsilon(1e-9));
  CHECK(sim["compute_s"].get<double>() == Approx(kSteps * step).epsilon(1e-9));
  CHECK(sim["communication_s"].get<double>() == Approx(expected - kSteps * step).epsilon(1e-9));
  CHECK(sim["waiting_s"].get<double>() == Approx(0).margin(1e-12));
  CHECK(sim["compute"] == "fixed");
  const auto train = read_csv(dir / "run" / "train.csv");
  CHECK(std::stod(train.back().at("sim_time_s")) == Approx(expected).epsilon(1e-9));
  CHECK(std::stod(train.front().at("sim_time_s")) >= step);
  // Evaluation is the simulator's business: it costs no simulated time.
  const auto validation = read_csv(dir / "run" / "validation.csv");
  CHECK(std::stod(validation.front().at("sim_time_s")) == 0);
  CHECK(std::stod(validation.back().at("sim_time_s")) == Approx(expected).epsilon(1e-9));
}

TEST_CASE("accounting: a node at half speed doubles DDP's simulated time, and the others wait for it", "[accounting]") {
  TempDir dir("straggler");
  const int K = 4;
  json m = manifest_with(K, "allreduce", json::object());
  m["network"] = {{"bandwidth", "100Gbit/s"}, {"latency", "0ms"}};
  m["compute"] = {{"step_time", "50ms"}};
  const fs::path even = dir / "even", slow = dir / "slow";
  fs::create_directories(even);
  fs::create_directories(slow);
  run_json(m, even);
  m["compute"]["speed"] = {{"2", 0.5}};
  run_json(m, slow);
  const double t_even = run_summary(even)["simulated"]["time_s"].get<double>();
  const double t_slow = run_summary(slow)["simulated"]["time_s"].get<double>();
  CHECK(t_slow / t_even == Approx(2.0).epsilon(0.01));
  const json per_node = run_summary(slow)["communication"]["per_node"];
  for (const auto& node : per_node) {
    const double waiting = node["waiting_s"].get<double>();
    if (node["node"] == 2) {
      CHECK(waiting == Approx(0).margin(1e-12));
      CHECK(node["compute_s"].get<double>() == Approx(kSteps * 0.1));
    } else {
      CHECK(waiting == Approx(kSteps * 0.05).epsilon(1e-6));  // 50 ms per step spent waiting for node 2
      CHECK(node["compute_s"].get<double>() == Approx(kSteps * 0.05));
    }
  }
}

TEST_CASE("accounting: a measured run's clocks add up, and a slow link slows every collective", "[accounting]") {
  TempDir dir("measured");
  json m = manifest_with(2, "allreduce", json::object());
  m["network"] = {{"bandwidth", "1Gbit/s"}, {"latency", "1ms"}, {"nodes", {{"1", {{"bandwidth", "1Mbit/s"}}}}}};
  run_json(m, dir.path());
  const json summary = run_summary(dir.path());
  CHECK(summary["simulated"]["compute"] == "measured");
  for (const auto& node : summary["communication"]["per_node"]) {
    const double total =
        node["compute_s"].get<double>() + node["communication_s"].get<double>() + node["waiting_s"].get<double>();
    CHECK(node["time_s"].get<double>() == Approx(total).epsilon(1e-9));
    CHECK(node["compute_s"].get<double>() > 0);
  }
  // Node 1's 1 Mbit/s link carries each step's all-reduce (4752 bytes).
  const double per_step = 2 * (0.001 + kParamBytes / 2 / 125000.0);
  CHECK(summary["simulated"]["communication_s"].get<double>() == Approx(kSteps * per_step).epsilon(1e-9));
}

TEST_CASE("accounting: the summary reports when the target loss was first reached", "[accounting]") {
  TempDir dir("target");
  json m = manifest_with(2, "allreduce", json::object());
  m["eval"]["interval"] = 5;
  m["compute"] = {{"step_time", "10ms"}};
  SECTION("reached") {
    m["eval"]["target_loss"] = 1.3;  // chance is ln 4 = 1.39
    auto r = run_json(m, dir.path());
    REQUIRE(r.target_hit.has_value());
    const json target = run_summary(dir.path())["target"];
    CHECK(target["reached"] == true);
    const int64_t step = target["step"].get<int64_t>();
    // The first evaluation at or below the target, and its clock.
    for (const auto& row : read_csv(dir / "run" / "validation.csv")) {
      const int64_t s = std::stoll(row.at("step"));
      if (s < step) CHECK(std::stod(row.at("global_loss")) > 1.3);
      if (s == step) {
        CHECK(std::stod(row.at("global_loss")) <= 1.3);
        CHECK(target["sim_time_s"].get<double>() == Approx(std::stod(row.at("sim_time_s"))));
      }
    }
    const std::string table = rt::command::comparison_table({r});
    CHECK_THAT(table, Catch::Contains("target_step") && Catch::Contains("sent/node") && Catch::Contains("sim_time"));
  }
  SECTION("not reached") {
    m["eval"]["target_loss"] = 0.0;
    auto r = run_json(m, dir.path());
    CHECK_FALSE(r.target_hit.has_value());
    CHECK(run_summary(dir.path())["target"] == json({{"loss", 0.0}, {"reached", false}}));
  }
}

TEST_CASE("accounting: byte counts and simulated time do not depend on parallelism", "[accounting]") {
  TempDir dir("layout");
  json m = manifest_with(4, "diloco", {{"H", 3}});
  m["compute"] = {{"step_time", "20ms"}};
  json last;
  for (int parallelism : {1, 4}) {
    m["parallelism"] = parallelism;
    const fs::path sub = dir / std::to_string(parallelism);
    fs::create_directories(sub);
    run_json(m, sub);
    const json summary = run_summary(sub);
    json now = {summary["communication"]["bytes_sent_total"], summary["simulated"]["time_s"]};
    if (!last.is_null()) CHECK(now == last);
    last = now;
  }
}

TEST_CASE("accounting: bytes and durations read well in tables", "[accounting]") {
  CHECK(rt::util::format_bytes(0) == "0 B");
  CHECK(rt::util::format_bytes(950) == "950 B");
  CHECK(rt::util::format_bytes(1234567) == "1.23 MB");
  CHECK(rt::util::format_bytes(45.6e9) == "45.6 GB");
  CHECK(rt::util::format_duration(0.0123) == "12.3ms");
  CHECK(rt::util::format_duration(4.21) == "4.2s");
  CHECK(rt::util::format_duration(42.14) == "42.1s");
  CHECK(rt::util::format_duration(65) == "1m05s");
  CHECK(rt::util::format_duration(5400) == "1h30m");
  CHECK(rt::util::format_duration(-1) == "?");
}
