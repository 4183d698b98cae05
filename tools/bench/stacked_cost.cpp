// The "stacked" section (docs/performance.md#stacked-execution): the same
// DiLoCo work run per node and stacked by the simulator, side by side with
// one bare replica training K times the batch (the cost of the same
// examples without K replicas: what stacking aims for). MLP 784-256-10 at
// 64 nodes of batch 64, at 64 and at options.max_nodes nodes of batch 8
// (the per-node rate as K grows), and nanoGPT small at 8 nodes. Each run in
// a fresh child process; the rate is taken after the first steps (their
// first touches of fresh memory), the fastest of options.repeat runs.
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
  int64_t batch_size, steps, warm_steps;
};

// The simulator's node-steps per second after the warm-up steps, the
// fastest of o.repeat runs.
double simulator_rate(const BenchOptions& o, json spec, const StackedCase& c) {
  spec["kind"] = "simulator";
  spec["mark_step"] = c.warm_steps;
  double best = 0;
  for (int i = 0; i < o.repeat; ++i) {
    const double seconds = measure(o, spec)["after_mark_seconds"];
    best = std::max(best, static_cast<double>(c.nodes * (c.steps - c.warm_steps)) / seconds);
  }
  return best;
}

// One bare replica training the K nodes' examples of each step as one batch,
// in node-steps per second (its whole loop: the bare loop marks no step).
double one_replica_rate(const BenchOptions& o, const StackedCase& c) {
  json spec = training_spec(c.model, 1, c.steps, c.batch_size * c.nodes, "allreduce", adamw_options());
  spec["kind"] = "bare";
  double best = 0;
  for (int i = 0; i < o.repeat; ++i) {
    const double seconds = measure(o, spec)["loop_seconds"];
    best = std::max(best, static_cast<double>(c.nodes * c.steps) / seconds);
  }
  return best;
}

}  // namespace

json stacked_section(const BenchOptions& o) {
  const ModelCase mlp = mlp_case(o), gpt = o.quick ? mlp_case(o) : nanogpt_case(o);
  std::vector<StackedCase> cases = {{mlp, o.quick ? 4 : 64, 64, o.quick ? 4 : 40, o.quick ? 1 : 10},
                                    {mlp, o.quick ? 4 : 64, 8, o.quick ? 4 : 40, o.quick ? 1 : 10},
                                    {gpt, o.quick ? 2 : 8, gpt.batch_size, o.quick ? 3 : 12, o.quick ? 1 : 2}};
  if (!o.quick && o.max_nodes > 64) cases.insert(cases.begin() + 2, {mlp, o.max_nodes, 8, 12, 2});
  std::cout << "Stacked execution: DiLoCo (H = 10, AdamW) per node and stacked, against one bare replica training "
               "K times the batch; node-steps per second after the first steps";
  if (o.repeat > 1) std::cout << " (the fastest of " << o.repeat << " runs of each)";
  std::cout << "\n\n";
  json out = json::array();
  std::vector<std::vector<std::string>> table;
  for (const StackedCase& c : cases) {
    json spec = training_spec(c.model, c.nodes, c.steps, c.batch_size, "diloco", diloco_options());
    spec["execution"] = "per_node";
    const double per_node = simulator_rate(o, spec, c);
    spec["execution"] = "stacked";
    const double stacked = simulator_rate(o, spec, c);
    const double one_replica = one_replica_rate(o, c);
    out.push_back({{"model", c.model.name},
                   {"nodes", c.nodes},
                   {"batch_size", c.batch_size},
                   {"per_node_node_steps_per_second", per_node},
                   {"stacked_node_steps_per_second", stacked},
                   {"one_replica_node_steps_per_second", one_replica},
                   {"stacked_over_per_node", stacked / per_node},
                   {"stacked_over_one_replica", stacked / one_replica}});
    table.push_back({c.model.name, std::to_string(c.nodes), std::to_string(c.batch_size), fmt(per_node, 1),
                     fmt(stacked, 1), fmt(one_replica, 1), fmt(stacked / per_node, 2), fmt(stacked / one_replica, 2)});
  }
  print_table({"model", "K", "batch", "per_node", "stacked", "one replica", "stacked/per_node", "stacked/one"}, table);
  return out;
}

}  // namespace exogym::bench
