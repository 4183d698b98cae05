// exogym-run over several processes (--nproc, or the torchrun variables),
// on loopback: the same model.pt, bytes and simulated time as one process.
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_helpers.h"
#include "exogym/runtime/dist/tcp_ports.h"
#include "helpers.h"
#include "testing.h"

namespace fs = std::filesystem;
using exogym::test::load_model_pt;
using exogym::test::Outcome;
using exogym::test::read_csv;
using exogym::test::read_text;
using exogym::test::run_cli;
using exogym::test::run_folder;
using exogym::test::small_manifest;
using exogym::test::spawn;
using exogym::test::TempDir;
using exogym::test::wait_for;
using exogym::test::write_manifest;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

json multiprocess_diloco() {
  json m = small_manifest(4);
  m["strategy"] = {{"plugin", "diloco"}, {"options", {{"H", 5}, {"optimizer", {{"name", "sgd"}, {"lr", 0.1}}}}}};
  return m;
}

// max |a - b| relative to the largest |b|, over every tensor.
double relative_difference(const std::map<std::string, at::Tensor>& a, const std::map<std::string, at::Tensor>& b) {
  double scale = 0;
  for (const auto& [name, t] : b) scale = std::max(scale, t.abs().max().item<double>());
  return exogym::test::max_abs_diff(a, b) / std::max(scale, 1e-30);
}

}  // namespace

TEST_CASE("exogym-run --nproc 2 and 4 give the single-process model.pt, bytes and simulated time",
          "[multiprocess][cli][slow]") {
  for (const auto& [strategy, manifest] :
       std::vector<std::pair<std::string, json>>{{"allreduce", small_manifest(4)}, {"diloco", multiprocess_diloco()}}) {
    INFO("strategy " << strategy);
    TempDir dir("mp-" + strategy);
    json m = manifest;
    m["compute"] = {{"step_time", "50ms"}};
    std::map<std::string, fs::path> folders;
    for (const std::string layout : {"1", "2", "4", "2-partial", "4-partial"}) {
      const std::string out = "out" + layout;
      m["output"]["dir"] = out;
      const auto file = write_manifest(dir, "m" + layout, m);
      std::vector<std::string> args = {"--quiet", file.string()};
      if (layout != "1") args = {"--quiet", "--nproc", layout.substr(0, 1), "--timeout", "20", file.string()};
      if (layout.find("partial") != std::string::npos) args.insert(args.begin(), "--partial-reduce");
      const Outcome o = run_cli(args, dir / ("log" + layout + ".txt"));
      INFO(o.output);
      REQUIRE(o.code == 0);
      folders[layout] = run_folder(dir, out);
    }
    const fs::path single = folders["1"];
    const auto single_model = load_model_pt(single / "model.pt");
    const auto single_summary = json::parse(read_text(single / "summary.json"));
    for (const std::string layout : {"2", "4", "2-partial", "4-partial"}) {
      INFO("--nproc " << layout);
      const fs::path folder = folders[layout];
      // The same files as a single-process run.
      for (const char* file :
           {"config.json", "train.csv", "validation.csv", "comm.csv", "metrics.csv", "summary.json", "model.pt"}) {
        INFO(file);
        REQUIRE(fs::exists(folder / file));
      }
      const auto model = load_model_pt(folder / "model.pt");
      if (layout.find("partial") == std::string::npos) {
        // Every process sums all nodes in rank order: the same bits.
        REQUIRE(exogym::test::bit_identical(model, single_model));
        REQUIRE(read_text(folder / "train.csv") == read_text(single / "train.csv"));
        REQUIRE(read_text(folder / "validation.csv") == read_text(single / "validation.csv"));
      } else {
        // Per-process partial sums change the association only.
        REQUIRE(relative_difference(model, single_model) <= 1e-6);
      }
      const auto summary = json::parse(read_text(folder / "summary.json"));
      // Bytes: exactly what the same virtual nodes send in one process.
      REQUIRE(summary["communication"] == single_summary["communication"]);
      REQUIRE(summary["communication"]["bytes_sent_total"].get<double>() > 0);
      // Simulated time with a fixed step time: exactly the same clocks.
      REQUIRE(summary["simulated"]["time_s"] == single_summary["simulated"]["time_s"]);
      REQUIRE(summary["simulated"]["waiting_s"] == single_summary["simulated"]["waiting_s"]);
      REQUIRE(read_text(folder / "comm.csv") == read_text(single / "comm.csv"));
      const auto train = read_csv(folder / "train.csv");
      const auto single_train = read_csv(single / "train.csv");
      REQUIRE(train.size() == single_train.size());
      for (size_t i = 0; i < train.size(); ++i) {
        REQUIRE(train[i].at("sim_time_s") == single_train[i].at("sim_time_s"));
        REQUIRE(train[i].at("bytes_sent") == single_train[i].at("bytes_sent"));
        REQUIRE(std::stod(train[i].at("train_loss")) ==
                Approx(std::stod(single_train[i].at("train_loss"))).epsilon(1e-5));
      }
      // The global evaluation (node 1, in process 0 or 1) and node 0's log work.
      const auto validation = read_csv(folder / "validation.csv");
      const auto single_validation = read_csv(single / "validation.csv");
      REQUIRE(validation.size() == single_validation.size());
      for (size_t i = 0; i < validation.size(); ++i) {
        REQUIRE(std::stod(validation[i].at("global_loss")) ==
                Approx(std::stod(single_validation[i].at("global_loss"))).epsilon(1e-5));
        REQUIRE(validation[i].at("sim_time_s") == single_validation[i].at("sim_time_s"));
      }
      const auto runtime = json::parse(read_text(folder / "config.json"))["runtime"];
      REQUIRE(runtime["processes"] == std::stoi(layout.substr(0, 1)));
      REQUIRE(runtime["reduce"] == (layout.find("partial") == std::string::npos ? "exact" : "partial"));
      // Only process 0 wrote: one run folder.
      REQUIRE(std::distance(fs::directory_iterator(folder.parent_path()), fs::directory_iterator()) == 1);
    }
  }
}

TEST_CASE(
    "a low-bit reduce-scatter over two processes (empty chunks included) gives the single process's model, bytes and "
    "clocks",
    "[multiprocess][cli][quantize]") {
  TempDir dir("mp-reduce-scatter");
  // small_manifest's MLP on 4 nodes: its 32-, 128- and 4-value tensors fill
  // node 0's chunk alone, so the other nodes send empty chunks of them.
  json m = small_manifest(4);
  m["train"]["max_steps"] = 6;
  m["compute"] = {{"step_time", "50ms"}};
  m["strategy"] = {{"plugin", "streaming_diloco"},
                   {"options", {{"H", 2}, {"fragments", 2}, {"tau", 1}, {"quantize", "fp4"}}}};
  std::map<std::string, fs::path> folders;
  for (const std::string nproc : {"1", "2"}) {
    m["output"]["dir"] = "out" + nproc;
    const auto file = write_manifest(dir, "m" + nproc, m);
    std::vector<std::string> args = {"--quiet", file.string()};
    if (nproc != "1") args = {"--quiet", "--nproc", nproc, "--timeout", "20", file.string()};
    const Outcome o = run_cli(args, dir / ("log" + nproc + ".txt"));
    INFO(o.output);
    REQUIRE(o.code == 0);
    folders[nproc] = run_folder(dir, "out" + nproc);
  }
  CHECK(
      exogym::test::bit_identical(load_model_pt(folders["2"] / "model.pt"), load_model_pt(folders["1"] / "model.pt")));
  const std::string comm = read_text(folders["1"] / "comm.csv");
  CHECK(comm.find("all_to_all") != std::string::npos);
  CHECK(read_text(folders["2"] / "comm.csv") == comm);
  const json one = json::parse(read_text(folders["1"] / "summary.json"));
  const json two = json::parse(read_text(folders["2"] / "summary.json"));
  CHECK(two["communication"] == one["communication"]);
  for (const char* key : {"time_s", "waiting_s", "hidden_s"}) CHECK(two["simulated"][key] == one["simulated"][key]);
}

TEST_CASE("runs with --partial-reduce over the same process count are bit-identical", "[multiprocess][cli][slow]") {
  TempDir dir("mp-bits");
  json m = multiprocess_diloco();
  m["compute"] = {{"step_time", "50ms"}};  // train.csv's simulated times are then deterministic too
  std::map<std::string, fs::path> folders;
  for (const std::string tag : {"a", "b"}) {
    m["output"]["dir"] = "out-" + tag;
    const auto file = write_manifest(dir, tag, m);
    const Outcome o =
        run_cli({"--nproc", "2", "--partial-reduce", "--quiet", file.string()}, dir / ("log-" + tag + ".txt"));
    INFO(o.output);
    REQUIRE(o.code == 0);
    folders[tag] = run_folder(dir, "out-" + tag);
  }
  REQUIRE(
      exogym::test::bit_identical(load_model_pt(folders["a"] / "model.pt"), load_model_pt(folders["b"] / "model.pt")));
  REQUIRE(read_text(folders["a"] / "train.csv") == read_text(folders["b"] / "train.csv"));
  REQUIRE(read_text(folders["a"] / "validation.csv") == read_text(folders["b"] / "validation.csv"));
}

TEST_CASE("exogym-run over two processes started by hand with RANK and WORLD_SIZE, or flags", "[multiprocess][cli]") {
  TempDir dir("mp-env");
  json m = small_manifest(2);
  const auto file = write_manifest(dir, "m", m);
  const int port = exogym::runtime::dist::pick_free_port();
  const auto started = Clock::now();
  // Process 1 by environment, process 0 by flags.
  const pid_t p1 =
      spawn({"--quiet", "--timeout", "20", file.string()},
            {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}},
            dir / "log1.txt");
  const pid_t p0 = spawn({"--quiet", "--rank", "0", "--world-size", "2", "--master-addr", "127.0.0.1", "--master-port",
                          std::to_string(port), "--timeout", "20", file.string()},
                         {}, dir / "log0.txt");
  const Outcome o0 = wait_for(p0, dir / "log0.txt", started, 120);
  const Outcome o1 = wait_for(p1, dir / "log1.txt", started, 120);
  INFO(o0.output << "\n---\n" << o1.output);
  REQUIRE(o0.code == 0);
  REQUIRE(o1.code == 0);
  REQUIRE(fs::exists(run_folder(dir, "out") / "model.pt"));
  REQUIRE_THAT(o0.output, Catch::Contains("outputs:"));
  REQUIRE(o1.output.find("outputs:") == std::string::npos);  // process 1 prints nothing on success
}

TEST_CASE("each process loads the data once, for its own block of nodes, and uneven blocks work",
          "[multiprocess][cli]") {
  TempDir dir("mp-data");
  json m = small_manifest(5);  // 5 nodes over 2 processes: blocks of 2 and 3
  m["model"]["options"]["input_size"] = 1;
  const std::string log = (dir / "requests.txt").string();
  m["data"]["train"] = {{"dataset", "counting"}, {"options", {{"size", 4000}, {"classes", 4}, {"log", log}}}};
  m["data"]["val"] = {{"dataset", "counting"}, {"split", "test"}, {"options", {{"size", 400}, {"classes", 4}}}};
  m["compute"] = {{"step_time", "10ms"}};
  const auto file = write_manifest(dir, "m", m);
  const std::vector<std::string> plugins = {"--plugin-path", EXOGYM_TEST_PLUGIN_DIR};
  std::vector<std::string> args = plugins;
  args.insert(args.end(), {"--quiet", "--nproc", "2", "--timeout", "20", file.string()});
  const Outcome o = run_cli(args, dir / "log.txt", 60);
  INFO(o.output);
  REQUIRE(o.code == 0);
  std::vector<std::string> lines = exogym::test::read_lines(log);
  std::sort(lines.begin(), lines.end());
  REQUIRE(lines.size() == 2);  // once per process (the launcher checks the manifest without loading data)
  std::istringstream first(lines[0]), second(lines[1]);
  std::string split0, split1;
  int f0, n0, k0, f1, n1, k1;
  long pid0, pid1;
  first >> split0 >> f0 >> n0 >> k0 >> pid0;
  second >> split1 >> f1 >> n1 >> k1 >> pid1;
  REQUIRE(split0 == "train");
  REQUIRE(split1 == "train");
  REQUIRE(f0 == 0);
  REQUIRE(n0 == 2);
  REQUIRE(f1 == 2);
  REQUIRE(n1 == 3);
  REQUIRE(k0 == 5);
  REQUIRE(k1 == 5);
  REQUIRE(pid0 != pid1);
  // Uneven blocks give the single-process result too.
  m["data"]["train"]["options"].erase("log");
  m["output"]["dir"] = "single";
  const auto single_file = write_manifest(dir, "single", m);
  std::vector<std::string> single_args = plugins;
  single_args.insert(single_args.end(), {"--quiet", single_file.string()});
  REQUIRE(run_cli(single_args, dir / "log1.txt", 60).code == 0);
  REQUIRE(exogym::test::bit_identical(load_model_pt(run_folder(dir, "out") / "model.pt"),
                                      load_model_pt(run_folder(dir, "single") / "model.pt")));
}

TEST_CASE("metrics recorded by nodes of other processes reach metrics.csv", "[multiprocess][cli]") {
  TempDir dir("mp-metrics");
  json m = small_manifest(4);
  m["train"]["max_steps"] = 3;
  m["strategy"] = {{"plugin", std::string(EXOGYM_TEST_PLUGIN_DIR) + "/exogym_strategy_faulty.so"},
                   {"options", {{"fail_node", -1}, {"record", true}}}};
  const auto file = write_manifest(dir, "m", m);
  const Outcome o = run_cli({"--quiet", "--nproc", "2", "--timeout", "20", file.string()}, dir / "log.txt", 60);
  INFO(o.output);
  REQUIRE(o.code == 0);
  std::set<std::pair<int, int>> seen;
  for (const auto& row : read_csv(run_folder(dir, "out") / "metrics.csv")) {
    if (row.at("name") == "gradients_held") {  // released after every step (test_training.cpp)
      REQUIRE(row.at("value") == "0");
      continue;
    }
    REQUIRE(row.at("name") == "probe");
    const int node = std::stoi(row.at("node")), step = std::stoi(row.at("step"));
    REQUIRE(std::stod(row.at("value")) == 1000.0 * node + step);
    seen.insert({node, step});
  }
  REQUIRE(seen.size() == 12);  // 4 nodes x 3 steps, from both processes
}
