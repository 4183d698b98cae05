#include "bench/report_cost.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "bench/table.h"
#include "exogym/runtime/output/report/report.h"
#include "exogym/runtime/output/run_writer.h"
#include "exogym/runtime/util/units.h"

namespace exogym::bench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kNodes = 4;

// A run folder as a 4-node run with an eval every 100 steps, a gradient
// norm recorded by every node every step and an outer step every 20 writes.
void write_synthetic_run(const fs::path& dir, int64_t steps, int variant) {
  runtime::output::RunWriter writer(dir, {"accuracy"});
  writer.write_config({{"name", "bench"}, {"nodes", kNodes}, {"strategy", {{"plugin", "diloco"}}}});
  json per_node = json::array();
  for (int node = 0; node < kNodes; ++node) {
    per_node.push_back({{"node", node}, {"compute_s", 10.0 + node}, {"communication_s", 3.0}, {"waiting_s", 1.0}});
  }
  const double scale = 1.0 + 0.1 * variant;
  for (int64_t t = 1; t <= steps; ++t) {
    // A decaying loss with noise and a spike, so the down-sampling has work.
    const double loss =
        scale * (2.3 * std::exp(-t / (steps / 5.0)) + 0.1 + 0.05 * std::sin(t * 0.7)) + (t == steps / 2 ? 3.0 : 0.0);
    writer.train_row(t, t * 256, loss, 1e-3, t * 1e5, t * 0.01);
    for (int node = 0; node < kNodes; ++node) writer.record(node, t - 1, "grad_norm", loss * (1 + 0.01 * node));
    if (t % 20 == 0) writer.record(0, t - 1, "pseudo_grad_norm", loss);
    if (t % 100 == 0 || t == 1) {
      runtime::output::EvalValues values{loss, {1.0 / (1.0 + loss)}};
      writer.validation_row(t, values, values, t * 1e5, t * 0.01);
    }
  }
  writer.write_summary({{"steps", steps},
                        {"last_train_loss", 0.2},
                        {"communication", {{"per_node", per_node}, {"bytes_sent_per_node", steps * 1e5}}}});
}

struct Cost {
  double seconds = 0;
  double bytes = 0;
};

Cost time_report(const std::vector<fs::path>& runs, const fs::path& file) {
  Cost cost{1e30, 0};
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    runtime::output::report::write_report(runs, file, "bench");
    cost.seconds =
        std::min(cost.seconds, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  cost.bytes = static_cast<double>(fs::file_size(file));
  return cost;
}

// What one NodeContext::record costs the strategy that calls it: a locked
// line in metrics.csv's buffer.
double record_microseconds(const fs::path& dir) {
  runtime::output::RunWriter writer(dir, {});
  constexpr int kCalls = 200000;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) writer.record(i % kNodes, i / kNodes, "grad_norm", 1.0 + i * 1e-6);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kCalls * 1e6;
}

}  // namespace

json report_section(const BenchOptions& o) {
  const fs::path work = fs::temp_directory_path() / ("exogym-bench-report-" + std::to_string(::getpid()));
  fs::remove_all(work);
  json rows = json::array();
  std::vector<std::vector<std::string>> table;
  struct Case {
    std::string name;
    int runs;
    int64_t steps;
  };
  const std::vector<Case> cases = {{"comparison", 5, o.quick ? 60 : 600}, {"long run", 1, o.quick ? 10000 : 100000}};
  for (const auto& c : cases) {
    std::vector<fs::path> runs;
    for (int v = 0; v < c.runs; ++v) {
      runs.push_back(work / (c.name + "-" + std::to_string(v)));
      write_synthetic_run(runs.back(), c.steps, v);
    }
    const Cost cost = time_report(runs, work / (c.name + ".html"));
    rows.push_back({{"case", c.name},
                    {"runs", c.runs},
                    {"steps", c.steps},
                    {"write_seconds", cost.seconds},
                    {"bytes", cost.bytes}});
    table.push_back({c.name, std::to_string(c.runs), std::to_string(c.steps), fmt(cost.seconds, 3),
                     runtime::util::format_bytes(cost.bytes)});
  }
  const double record_us = record_microseconds(work / "record");
  fs::remove_all(work);
  std::cout << "report.html (the fastest of 5 writes, from the run folders' files)\n\n";
  print_table({"case", "runs", "steps/run", "write_s", "size"}, table);
  std::cout << "a strategy's ctx.record(): " << fmt(record_us, 3) << " us per call\n\n";
  return {{"reports", rows}, {"record_microseconds", record_us}};
}

}  // namespace exogym::bench
