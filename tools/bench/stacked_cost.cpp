// The "stacked" section (docs/performance.md#stacked-execution): the same
// DiLoCo work run per node and stacked by the simulator, side by side with
// one bare replica training K times the batch (the cost of the same
// examples without K replicas: what stacking aims for). MLP 784-256-10 at
// 64 nodes of batch 64, at 64 and at options.max_nodes nodes of batch 8
// (the per-node rate as K grows), and nanoGPT small at 8 nodes. Each run in
// a fresh child process, each way timed after its first H steps (their
// first touches of fresh memory), the fastest of options.repeat runs; the
// peak resident memory of each way, the least of them.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "bench/sections.h"
#include "bench/table.h"
#include "bench/workloads.h"

namespace exogym::bench {

using nlohmann::json;

namespace {

struct StackedCase {
  ModelCase model;
  int nodes;
  // The rate counts the steps after the first warm_steps. warm_steps is a
  // multiple of DiLoCo's H: the timing mark is then an outer step, which
  // every node reaches in either execution. Elsewhere it would not be: per
  // node, with fewer compute slots than nodes, the first nodes take their H
  // local steps before the others start theirs, and a mark at the first
  // node's step 2 timed most nodes' first steps as steady ones (8 nanoGPT
  // nodes per node read 10.4-11.7 node-steps/s this way, 14.0-15.4 at the
  // outer step).
  int64_t batch_size, steps, warm_steps;
};

// The simulator's node-steps per second after the warm-up steps, the
// fastest of o.repeat runs, and the least of their peak resident memory.
struct SimulatorRun {
  double rate = 0, peak_rss = 0;
};

SimulatorRun simulator_run(const BenchOptions& o, json spec, const StackedCase& c) {
  spec["kind"] = "simulator";
  spec["mark_step"] = c.warm_steps - 1;
  SimulatorRun best;
  for (int i = 0; i < o.repeat; ++i) {
    const json r = measure(o, spec);
    const double seconds = r["after_mark_seconds"], peak = r["peak_rss"];
    best.rate = std::max(best.rate, static_cast<double>(c.nodes * (c.steps - c.warm_steps)) / seconds);
    best.peak_rss = i == 0 ? peak : std::min(best.peak_rss, peak);
  }
  return best;
}

// One bare replica training the K nodes' examples of each step as one batch,
// in node-steps per second after the same first steps as the simulator's.
double one_replica_rate(const BenchOptions& o, const StackedCase& c) {
  json spec = training_spec(c.model, 1, c.steps, c.batch_size * c.nodes, "allreduce", adamw_options());
  spec["kind"] = "bare";
  spec["mark_step"] = c.warm_steps - 1;
  double best = 0;
  for (int i = 0; i < o.repeat; ++i) {
    const double seconds = measure(o, spec)["after_mark_seconds"];
    best = std::max(best, static_cast<double>(c.nodes * (c.steps - c.warm_steps)) / seconds);
  }
  return best;
}

}  // namespace

json stacked_section(const BenchOptions& o) {
  const ModelCase mlp = mlp_case(o), gpt = o.quick ? mlp_case(o) : nanogpt_case(o);
  const int64_t H = diloco_options()["H"];
  std::vector<StackedCase> cases = {{mlp, o.quick ? 4 : 64, 64, o.quick ? 2 * H : 4 * H, H},
                                    {mlp, o.quick ? 4 : 64, 8, o.quick ? 2 * H : 4 * H, H},
                                    {gpt, o.quick ? 2 : 8, gpt.batch_size, 2 * H, H}};
  if (!o.quick && o.max_nodes > 64) cases.insert(cases.begin() + 2, {mlp, o.max_nodes, 8, 2 * H, H});
  std::cout << "Stacked execution: DiLoCo (H = 10, AdamW) per node and stacked, against one bare replica training "
               "K times the batch; node-steps per second after the first outer step";
  if (o.repeat > 1) std::cout << " (the fastest of " << o.repeat << " runs of each)";
  std::cout << "\n\n";
  json out = json::array();
  std::vector<std::vector<std::string>> table;
  for (const StackedCase& c : cases) {
    json spec = training_spec(c.model, c.nodes, c.steps, c.batch_size, "diloco", diloco_options());
    spec["execution"] = "per_node";
    const SimulatorRun per_node = simulator_run(o, spec, c);
    spec["execution"] = "stacked";
    const SimulatorRun stacked = simulator_run(o, spec, c);
    const double one_replica = one_replica_rate(o, c);
    out.push_back({{"model", c.model.name},
                   {"nodes", c.nodes},
                   {"batch_size", c.batch_size},
                   {"per_node_node_steps_per_second", per_node.rate},
                   {"stacked_node_steps_per_second", stacked.rate},
                   {"one_replica_node_steps_per_second", one_replica},
                   {"stacked_over_per_node", stacked.rate / per_node.rate},
                   {"stacked_over_one_replica", stacked.rate / one_replica},
                   {"per_node_peak_rss", per_node.peak_rss},
                   {"stacked_peak_rss", stacked.peak_rss}});
    table.push_back({c.model.name, std::to_string(c.nodes), std::to_string(c.batch_size), fmt(per_node.rate, 1),
                     fmt(stacked.rate, 1), fmt(one_replica, 1), fmt(stacked.rate / per_node.rate, 2),
                     fmt(stacked.rate / one_replica, 2), fmt(per_node.peak_rss / 1e6, 0),
                     fmt(stacked.peak_rss / 1e6, 0), fmt(stacked.peak_rss / per_node.peak_rss, 2)});
  }
  print_table({"model", "K", "batch", "per_node", "stacked", "one replica", "stacked/per_node", "stacked/one",
               "per_node MB", "stacked MB", "memory ratio"},
              table);
  return out;
}

}  // namespace exogym::bench
