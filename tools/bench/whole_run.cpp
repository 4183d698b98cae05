// The "startup" section: the whole exogym-run process for a small job, from
// fork to exit, split by the run's own timing in summary.json.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "bench/sections.h"
#include "bench/table.h"
#include "bench/workloads.h"

namespace exogym::bench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The job of issue #21's comparison with the Python reference: MNIST MLP
// (784-256-10), DiLoCo H = 20 with AdamW 3e-4 and a cosine schedule of 100
// warm-up steps, batch 64, 150 steps, an evaluation every 50 steps on 1,024
// test examples.
json comparison_manifest(const BenchOptions& o, int nodes, int64_t steps, const fs::path& out) {
  json data = mnist_data(o);
  json val = data;
  val["split"] = "test";
  return {{"name", "whole-run"},
          {"seed", 42},
          {"nodes", nodes},
          {"model", {{"plugin", "mlp"}, {"options", {{"hidden", {256}}}}}},
          {"strategy",
           {{"plugin", "diloco"},
            {"options",
             {{"H", 20},
              {"optimizer", {{"name", "adamw"}, {"lr", 3e-4}}},
              {"outer_optimizer", {{"name", "sgd"}, {"lr", 0.7}, {"momentum", 0.9}, {"nesterov", true}}},
              {"lr_schedule", {{"name", "cosine"}, {"warmup_steps", 100}}}}}}},
          {"data", {{"train", data}, {"val", val}}},
          {"train", {{"max_steps", steps}, {"batch_size", 64}}},
          {"eval", {{"interval", 50}, {"size", 1024}}},
          {"output", {{"dir", out.string()}}}};
}

fs::path exogym_run_binary() {
  const fs::path next_to_us = fs::canonical("/proc/self/exe").parent_path() / "exogym-run";
  if (!fs::exists(next_to_us)) throw std::runtime_error(next_to_us.string() + ": not found (built with the bench?)");
  return next_to_us;
}

// One exogym-run process on `manifest`, its output discarded: the wall time
// from fork to exit, and summary.json's timing.
json run_once(const BenchOptions& o, const fs::path& manifest, const fs::path& run_folder) {
  fs::remove_all(run_folder);
  const std::string binary = exogym_run_binary().string();
  std::vector<std::string> args = {binary, manifest.string(), "--progress", "none", "--log-level", "warn"};
  if (!o.plugin_path.empty()) args.insert(args.end(), {"--plugin-path", o.plugin_path});
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const auto started = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, STDOUT_FILENO);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error(binary + " " + manifest.string() + " failed (status " + std::to_string(status) + ")");
  }
  json summary;
  std::ifstream(run_folder / "summary.json") >> summary;
  const json& timing = summary.at("timing");
  const double datasets = timing.at("datasets_s"), startup = timing.at("startup_s"), loop = timing.at("loop_s"),
               finish = timing.at("finish_s");
  return {{"wall_seconds", wall},
          {"datasets_seconds", datasets},
          {"startup_seconds", startup},
          {"loop_seconds", loop},
          {"finish_seconds", finish},
          // Loading LibTorch and the plugins, reading the manifest, writing
          // report.html and the comparison, exiting.
          {"other_seconds", wall - datasets - startup - loop - finish}};
}

}  // namespace

json whole_run_section(const BenchOptions& o) {
  std::cout << "The whole exogym-run process: MNIST MLP DiLoCo (H = 20), batch 64, evaluations on 1,024 examples";
  if (o.repeat > 1) std::cout << " (the fastest of " << o.repeat << " runs)";
  std::cout << "\n\n";
  const fs::path dir = fs::temp_directory_path() / ("exogym-bench-whole-" + std::to_string(getpid()));
  fs::create_directories(dir);
  json rows = json::array();
  std::vector<std::vector<std::string>> table;
  const int64_t steps = o.quick ? 10 : 150;
  for (const int nodes : {4, 16}) {
    const fs::path manifest = dir / ("whole-run-" + std::to_string(nodes) + ".json");
    std::ofstream(manifest) << comparison_manifest(o, nodes, steps, dir / "runs").dump(2);
    json best;
    std::vector<double> walls;
    for (int i = 0; i < o.repeat; ++i) {
      json run = run_once(o, manifest, dir / "runs" / "whole-run");
      walls.push_back(run["wall_seconds"]);
      if (best.is_null() || run["wall_seconds"] < best["wall_seconds"]) best = run;
    }
    best["nodes"] = nodes;
    best["steps"] = steps;
    best["wall_runs_seconds"] = walls;
    rows.push_back(best);
    table.push_back({std::to_string(nodes), std::to_string(steps), fmt(best["wall_seconds"], 2),
                     fmt(best["datasets_seconds"], 3), fmt(best["startup_seconds"], 3), fmt(best["loop_seconds"], 2),
                     fmt(best["finish_seconds"], 3), fmt(best["other_seconds"], 2)});
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  print_table({"K", "steps", "whole_s", "datasets_s", "startup_s", "loop_s", "finish_s", "other_s"}, table);
  return rows;
}

}  // namespace exogym::bench
