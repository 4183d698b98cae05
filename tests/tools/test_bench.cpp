// The benchmark harness's quick mode: it runs, measures every section and
// writes its JSON. (How fast anything is, is the harness's own business.)
//
// helpers.h comes first: it pulls in LibTorch, hence glog, whose CHECK macro
// would otherwise replace Catch's and silently stop counting assertions.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "exogym/build_config.h"
#include "helpers.h"
#include "testing.h"

using exogym::test::read_text;
using exogym::test::TempDir;
using nlohmann::json;

TEST_CASE("the benchmark harness in quick mode measures the simulator against a bare loop and writes JSON", "[bench]") {
  TempDir dir("bench");
  const std::string bench = std::string(EXOGYM_BINARY_DIR) + "/bin/exogym-bench";
  const std::string command = bench + " --quick --models mlp --json " + (dir / "bench.json").string() + " > " +
                              (dir / "out.txt").string() + " 2>&1";
  const int status = std::system(command.c_str());
  INFO(read_text(dir / "out.txt"));
  REQUIRE(status == 0);
  const json report = json::parse(read_text(dir / "bench.json"));
  REQUIRE(report["overhead"].size() == 2);  // mlp at K = 1 and 2
  for (const auto& row : report["overhead"]) {
    CHECK(row["model"] == "mlp");
    const double ratio = row["overhead_ratio"];
    CHECK(std::isfinite(ratio));
    CHECK(ratio > 0);
    CHECK(row["bare_loop_seconds"].get<double>() > 0);
    CHECK(row["steps_per_second"].get<double>() > 0);
    CHECK(row["startup_seconds"].get<double>() > 0);
    CHECK(row["libtorch_load_seconds"].get<double>() > 0);
    CHECK(row["libtorch_load_seconds"].get<double>() < row["startup_seconds"].get<double>());
    CHECK(row["peak_rss_bytes"].get<double>() > 50e6);  // LibTorch alone is more
    CHECK(row["parameters"] == 784 * 256 + 256 + 256 * 10 + 10);
  }
  REQUIRE(report["node_sweep"].size() == 2);
  CHECK(report["node_sweep"][1]["nodes"] == 4);
  for (const auto& row : report["node_sweep"]) {
    // Two halves of 10 steps, timed apart in one run (TrainingOptions::timing_mark_step).
    CHECK(row["steps"] == 20);
    for (const char* rate : {"node_steps_per_second_first_half", "node_steps_per_second"}) {
      INFO(rate);
      CHECK(std::isfinite(row[rate].get<double>()));
      CHECK(row[rate].get<double>() > 0);
    }
  }
  // MNIST's training images stay bytes (not 4-byte floats) in memory.
  CHECK(report["dataset_bytes"].get<double>() > 60000 * 784 * 0.9);
  CHECK(report["dataset_bytes"].get<double>() < 60000 * 784 * 2);
  // The whole exogym-run process, at 4 and 16 nodes, split by summary.json.
  const json& whole = report.at("whole_run");
  REQUIRE(whole.size() == 2);
  CHECK(whole[0]["nodes"] == 4);
  CHECK(whole[1]["nodes"] == 16);
  for (const auto& row : whole) {
    for (const char* part : {"datasets_seconds", "startup_seconds", "loop_seconds", "finish_seconds", "other_seconds"})
      CHECK(row[part].get<double>() > 0);
    CHECK(row["wall_seconds"].get<double>() >
          row["datasets_seconds"].get<double>() + row["loop_seconds"].get<double>());
  }
  REQUIRE(report["parallelism_sweep"].size() == 2);
  // report.html: a 5-variant comparison and a long run, timed and sized.
  const json& reports = report["report"]["reports"];
  REQUIRE(reports.size() == 2);
  CHECK(reports[0]["runs"] == 5);
  CHECK(reports[1]["steps"] == 10000);
  for (const auto& row : reports) {
    CHECK(row["write_seconds"].get<double>() > 0);
    CHECK(row["bytes"].get<double>() > 10000);
  }
  CHECK(report["report"]["record_microseconds"].get<double>() > 0);
  // Checkpoints: one of 2 nodes, and the share of a run spent saving.
  const json& checkpoint = report.at("checkpoint");
  CHECK(checkpoint["one"]["seconds"].get<double>() > 0);
  CHECK(checkpoint["one"]["bytes"].get<double>() > 2 * 4 * 784 * 256);  // two nodes' first layer at least
  CHECK(checkpoint["periodic"]["share"].get<double>() > 0);
  CHECK(checkpoint["periodic"]["share"].get<double>() < 1);
  // fp32 against bf16 (quick: the MLP alone).
  const json& precision = report.at("precision");
  REQUIRE(precision.size() == 1);
  CHECK(precision[0]["model"] == "mlp");
  CHECK(precision[0]["fp32_steps_per_second"].get<double>() > 0);
  CHECK(precision[0]["bf16_steps_per_second"].get<double>() > 0);
  // DiLoCo (quick: 2 MLP nodes, H = 2, 4 steps): the bare loop does the
  // simulator's work in the same order, so node 0 ends at the same loss, bit
  // for bit; memory is measured against what one replica takes alone.
  const json& gpt16 = report.at("nanogpt16");
  CHECK(gpt16["nodes"] == 2);
  CHECK(gpt16["bare_last_loss"].get<double>() == gpt16["simulator_last_loss"].get<double>());
  CHECK(gpt16["throughput_ratio"].get<double>() > 0);
  CHECK(gpt16["state_bytes_per_node"] == 4.0 * 4 * (784 * 256 + 256 + 256 * 10 + 10));
  CHECK(gpt16["one_replica_bytes"].get<double>() > gpt16["state_bytes_per_node"].get<double>());
  CHECK(gpt16["memory_ratio"].get<double>() > 0);
  // DeMo: one node's compression per step against its passes.
  const json& demo = report.at("demo");
  CHECK(demo["model"] == "mlp");
  CHECK(demo["forward_backward_seconds"].get<double>() > 0);
  CHECK(demo["compression_seconds"].get<double>() > 0);
  CHECK(demo["ratio"].get<double>() ==
        Approx(demo["compression_seconds"].get<double>() / demo["forward_backward_seconds"].get<double>()));
  // The non-finite check: one pass over the MLP's parameters, and a step.
  const json& nonfinite = report.at("nonfinite");
  REQUIRE(nonfinite.size() == 1);
  CHECK(nonfinite[0]["model"] == "mlp");
  CHECK(nonfinite[0]["check_seconds"].get<double>() > 0);
  CHECK(nonfinite[0]["step_seconds"].get<double>() > 0);
  REQUIRE(report["targets"].size() >= 4);
  CHECK_THAT(read_text(dir / "out.txt"), Catch::Contains("overhead") && Catch::Contains("Targets"));
}

TEST_CASE("the benchmark harness shares the tools' flags and refuses bad ones with status 2", "[bench][cli]") {
  TempDir dir("bench-args");
  const std::string bench = std::string(EXOGYM_BINARY_DIR) + "/bin/exogym-bench";
  const std::string out = (dir / "out.txt").string();
  // Exit status 2 and the output, for `args`.
  auto refused = [&](const std::string& args) {
    const int status = std::system((bench + " " + args + " > " + out + " 2>&1").c_str());
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 2);
    return read_text(dir / "out.txt");
  };
  CHECK_THAT(refused("--models mlp,resnet"), Catch::Contains("--models") && Catch::Contains("resnet"));
  CHECK_THAT(refused("--models=cnn,resnet"), Catch::Contains("--models") && Catch::Contains("resnet"));
  CHECK_THAT(refused("--fast"), Catch::Contains("--fast"));
  CHECK_THAT(refused("--repeat 0"), Catch::Contains("--repeat"));
  CHECK_THAT(refused("--data " + (dir / "none").string()), Catch::Contains("no mnist/ folder here (use --data)"));
  // Before measuring anything, not after.
  CHECK_THAT(refused("--json " + (dir / "missing" / "bench.json").string()),
             Catch::Contains("--json") && Catch::Contains("does not exist"));
  CHECK_THAT(refused("--json " + dir.path().string()), Catch::Contains("--json") && Catch::Contains("is a folder"));
  CHECK(std::system((bench + " --version > " + out + " 2>&1").c_str()) == 0);
  CHECK_THAT(read_text(dir / "out.txt"), Catch::StartsWith(std::string("exogym-bench ") + EXOGYM_VERSION));
}

TEST_CASE("the benchmark harness measures only the sections and node counts asked for", "[bench]") {
  TempDir dir("bench-sections");
  const std::string bench = std::string(EXOGYM_BINARY_DIR) + "/bin/exogym-bench";
  const std::string command = bench + " --quick --models mlp --sections overhead --nodes 3 --repeat 2 --json " +
                              (dir / "bench.json").string() + " > " + (dir / "out.txt").string() + " 2>&1";
  const int status = std::system(command.c_str());
  INFO(read_text(dir / "out.txt"));
  REQUIRE(status == 0);
  const json report = json::parse(read_text(dir / "bench.json"));
  REQUIRE(report["overhead"].size() == 1);
  CHECK(report["overhead"][0]["nodes"] == 3);
  CHECK_FALSE(report.contains("node_sweep"));
  CHECK_FALSE(report.contains("parallelism_sweep"));
  CHECK_FALSE(report.contains("report"));
  CHECK_THAT(read_text(dir / "out.txt"), Catch::Contains("the fastest of 2 runs"));
  // Every run is kept; the table shows the fastest of each loop.
  const json row = report["overhead"][0];
  REQUIRE(row["simulator_runs_seconds"].size() == 2);
  REQUIRE(row["bare_runs_seconds"].size() == 2);
  REQUIRE(row["startup_runs_seconds"].size() == 2);
  CHECK(row["simulator_loop_seconds"] ==
        std::min(row["simulator_runs_seconds"][0].get<double>(), row["simulator_runs_seconds"][1].get<double>()));
  CHECK(row["bare_loop_seconds"] ==
        std::min(row["bare_runs_seconds"][0].get<double>(), row["bare_runs_seconds"][1].get<double>()));
  const std::string out = (dir / "bad.txt").string();
  CHECK(std::system((bench + " --sections overhead,speed > " + out + " 2>&1").c_str()) != 0);
  CHECK_THAT(read_text(dir / "bad.txt"), Catch::Contains("--sections") && Catch::Contains("speed"));
  CHECK(std::system((bench + " --nodes=4,0 > " + out + " 2>&1").c_str()) != 0);
  CHECK_THAT(read_text(dir / "bad.txt"), Catch::Contains("--nodes"));
}
