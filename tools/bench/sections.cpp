#include "bench/sections.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "bench/table.h"
#include "bench/workloads.h"
#include "exogym/runtime/util/units.h"

namespace exogym::bench {

using nlohmann::json;
using runtime::util::format_bytes;

namespace {

using Rows = std::vector<std::vector<std::string>>;

// `repeat` runs of the simulator and of the bare loop on `spec`, alternating
// the two so that slow phases of a noisy machine spread over both.
struct SideBySide {
  std::vector<json> simulator, bare;  // every run's measurement
};

SideBySide side_by_side(const BenchOptions& o, json spec) {
  SideBySide runs;
  for (int i = 0; i < o.repeat; ++i) {
    spec["kind"] = "simulator";
    runs.simulator.push_back(measure(o, spec));
    spec["kind"] = "bare";
    runs.bare.push_back(measure(o, spec));
  }
  return runs;
}

// One field of every run.
std::vector<double> field(const std::vector<json>& runs, const char* name) {
  std::vector<double> values;
  for (const auto& run : runs) values.push_back(run.at(name));
  return values;
}

// One overhead row.
json overhead_row(const BenchOptions& o, const ModelCase& c, int K, int64_t steps) {
  const SideBySide runs = side_by_side(o, training_spec(c, K, steps, c.batch_size, "allreduce", adamw_options()));
  const json &sim = runs.simulator.back(), &bare = runs.bare.back();
  const std::vector<double> sim_runs = field(runs.simulator, "loop_seconds"),
                            bare_runs = field(runs.bare, "loop_seconds");
  const std::vector<double> startups = field(runs.simulator, "startup_seconds");
  const std::vector<double> loads = field(runs.simulator, "libtorch_load_seconds");
  // The load time shown is the fastest start-up's own part.
  const size_t fastest_start = std::min_element(startups.begin(), startups.end()) - startups.begin();
  const double sim_s = fastest(sim_runs), bare_s = fastest(bare_runs);
  const double examples = static_cast<double>(K * c.batch_size * steps);
  const int64_t params = sim["parameters"];
  return {{"model", c.name},
          {"nodes", K},
          {"steps", steps},
          {"steps_per_second", steps / sim_s},
          {"examples_per_second", examples / sim_s},
          {"tokens_per_second", c.tokens_per_example ? json(examples * c.tokens_per_example / sim_s) : json()},
          {"bare_loop_seconds", bare_s},
          {"simulator_loop_seconds", sim_s},
          {"overhead_ratio", sim_s / bare_s},
          {"startup_seconds", startups[fastest_start]},
          {"simulator_runs_seconds", sim_runs},
          {"bare_runs_seconds", bare_runs},
          {"startup_runs_seconds", startups},
          {"libtorch_load_seconds", loads[fastest_start]},
          {"peak_rss_bytes", sim["peak_rss"]},
          {"bare_peak_rss_bytes", bare["peak_rss"]},
          {"parameters", params},
          {"extra_bytes_per_node", (sim["peak_rss"].get<double>() - bare["peak_rss"].get<double>()) / K}};
}

std::vector<std::string> overhead_table_row(const json& row) {
  const bool tokens = !row["tokens_per_second"].is_null();
  return {row["model"].get<std::string>(),
          std::to_string(row["nodes"].get<int>()),
          std::to_string(row["steps"].get<int64_t>()),
          fmt(row["steps_per_second"], 1),
          fmt(tokens ? row["tokens_per_second"] : row["examples_per_second"], 0) + (tokens ? " tok" : ""),
          fmt(row["bare_loop_seconds"], 2),
          fmt(row["simulator_loop_seconds"], 2),
          fmt(row["overhead_ratio"], 3),
          fmt(row["startup_seconds"], 2),
          fmt(row["libtorch_load_seconds"], 2),
          format_bytes(row["peak_rss_bytes"]),
          format_bytes(row["extra_bytes_per_node"])};
}

}  // namespace

json overhead_section(const BenchOptions& o) {
  std::cout << "Simulator (allreduce) against a bare LibTorch loop doing the same work";
  if (o.repeat > 1) std::cout << " (the fastest of " << o.repeat << " runs of each)";
  std::cout << "\n\n";
  const std::vector<int> node_counts = !o.nodes.empty() ? o.nodes
                                       : o.quick        ? std::vector<int>{1, 2}
                                                        : std::vector<int>{1, 4, 16};
  json overhead = json::array();
  Rows rows;
  for (const auto& c : model_cases(o)) {
    for (int K : node_counts) {
      // Fewer steps for more nodes keeps every measurement a few seconds long.
      const int64_t steps =
          o.quick ? c.steps_quick : std::max<int64_t>(c.steps_quick, c.steps_full * 4 / std::max(4, K));
      overhead.push_back(overhead_row(o, c, K, steps));
      rows.push_back(overhead_table_row(overhead.back()));
    }
  }
  print_table({"model", "K", "steps", "steps/s", "examples/s", "bare_s", "sim_s", "overhead", "startup_s",
               "of_which_torch", "peak_rss", "extra/node"},
              rows);
  return overhead;
}

double dataset_bytes(const BenchOptions& o, const json& data) {
  return measure(o, {{"kind", "dataset"}, {"data", data}})["dataset_bytes"];
}

// The sweep's batch per node: 4,096 nodes × 8 examples fit MNIST's 60,000
// training examples, so every K gives each node examples of its own.
constexpr int64_t kSweepBatch = 8;

json node_sweep_section(const BenchOptions& o, double dataset) {
  std::cout << "Node-count sweep: MLP (784-256-10) DiLoCo, H = 10, AdamW inner, batch " << kSweepBatch << "\n\n";
  std::vector<int> sweep_nodes;
  for (int K = 1; K <= o.max_nodes; K *= 4) sweep_nodes.push_back(K);
  if (!o.quick && sweep_nodes.back() != o.max_nodes) sweep_nodes.push_back(o.max_nodes);
  if (o.quick) sweep_nodes = {1, 4};
  // Two halves: the first steps (fresh optimizer state faulted in, cold
  // caches) and the steady rate after them, from the outer step that ends
  // the first half (every node has done its steps there) to the end.
  const int64_t half = o.quick ? 10 : 20, steps = 2 * half;
  json sweep = json::array();
  Rows rows;
  for (int K : sweep_nodes) {
    json spec = training_spec(mlp_case(o), K, steps, kSweepBatch, "diloco", diloco_options());
    spec["kind"] = "simulator";
    spec["mark_step"] = half - 1;
    const json sim = measure(o, spec);
    const double loop_s = sim["loop_seconds"], steady_s = sim["after_mark_seconds"];
    const double first_rate = K * half / (loop_s - steady_s), steady_rate = K * half / steady_s;
    const double state = state_bytes(sim["parameters"], 2, /*gradients=*/false);
    const double per_node = (sim["peak_rss"].get<double>() - sim["base_rss"].get<double>() - dataset) / K;
    sweep.push_back({{"nodes", K},
                     {"steps", steps},
                     {"steps_per_second", steps / loop_s},
                     {"node_steps_per_second_first_half", first_rate},
                     {"node_steps_per_second", steady_rate},
                     {"peak_rss_bytes", sim["peak_rss"]},
                     {"bytes_per_node", per_node},
                     {"bytes_per_node_beyond_state", per_node - state},
                     {"completed", true}});
    rows.push_back({std::to_string(K), fmt(steps / loop_s, 2), fmt(first_rate, 0), fmt(steady_rate, 0),
                    format_bytes(sim["peak_rss"]), format_bytes(per_node), format_bytes(per_node - state)});
  }
  print_table(
      {"K", "steps/s", "node-steps/s 1st half", "node-steps/s 2nd half", "peak_rss", "rss/node", "beyond state/node"},
      rows);
  return sweep;
}

json parallelism_section(const BenchOptions& o) {
  std::cout << "Parallelism sweep: 16 MLP nodes, allreduce\n\n";
  const int nodes = o.quick ? 2 : 16;
  const std::vector<int> parallelisms = o.quick ? std::vector<int>{1, 2} : std::vector<int>{1, 2, 4, 16};
  const int64_t steps = o.quick ? 4 : 60;
  json parallel = json::array();
  Rows rows;
  for (int P : parallelisms) {
    json spec = training_spec(mlp_case(o), nodes, steps, 64, "allreduce", adamw_options());
    spec["kind"] = "simulator";
    spec["parallelism"] = P;
    const double loop_s = measure(o, spec)["loop_seconds"];
    const int threads = simulator_threads(nodes, P).threads;
    parallel.push_back({{"parallelism", P}, {"threads_per_node", threads}, {"steps_per_second", steps / loop_s}});
    rows.push_back({std::to_string(P), std::to_string(threads), fmt(steps / loop_s, 2)});
  }
  print_table({"parallelism", "threads/node", "steps/s"}, rows);
  return parallel;
}

json checkpoint_section(const BenchOptions& o) {
  std::cout << "Checkpoints: nanoGPT small (allreduce, AdamW), the files on this machine's disk\n\n";
  const ModelCase gpt = o.quick ? mlp_case(o) : nanogpt_case(o);
  // One checkpoint: 16 nodes, saved twice (the fastest counts less than
  // the mean, which the table shows).
  const int nodes = o.quick ? 2 : 16;
  json spec = training_spec(gpt, nodes, 4, gpt.batch_size, "allreduce", adamw_options());
  spec["kind"] = "simulator";
  spec["checkpoint_interval"] = 2;
  const json one = measure(o, spec);
  const double per_checkpoint = one["checkpoint_seconds"].get<double>() / one["checkpoints"].get<double>();
  // Every 100 steps: the share of the loop spent saving (4 nodes: the
  // share does not depend on the node count, both scale with it).
  const int run_nodes = o.quick ? 2 : 4;
  const int64_t steps = o.quick ? 20 : 300, interval = o.quick ? 10 : 100;
  spec = training_spec(gpt, run_nodes, steps, gpt.batch_size, "allreduce", adamw_options());
  spec["kind"] = "simulator";
  spec["checkpoint_interval"] = interval;
  const json run = measure(o, spec);
  const double share = run["checkpoint_seconds"].get<double>() / run["loop_seconds"].get<double>();
  print_table({"model", "K", "checkpoint_s", "size", "every", "steps", "loop_s", "saving_share"},
              {{gpt.name, std::to_string(nodes), fmt(per_checkpoint, 3), format_bytes(one["checkpoint_bytes"]), "-",
                "-", "-", "-"},
               {gpt.name, std::to_string(run_nodes),
                fmt(run["checkpoint_seconds"].get<double>() / run["checkpoints"].get<double>(), 3),
                format_bytes(run["checkpoint_bytes"]), std::to_string(interval), std::to_string(steps),
                fmt(run["loop_seconds"], 2), fmt(100 * share, 2) + " %"}});
  return {{"model", gpt.name},
          {"one", {{"nodes", nodes}, {"seconds", per_checkpoint}, {"bytes", one["checkpoint_bytes"]}}},
          {"periodic",
           {{"nodes", run_nodes},
            {"steps", steps},
            {"interval", interval},
            {"loop_seconds", run["loop_seconds"]},
            {"checkpoint_seconds", run["checkpoint_seconds"]},
            {"share", share}}}};
}

json precision_section(const BenchOptions& o) {
  std::cout << "Mixed precision: DiLoCo on 4 nodes, fp32 against bf16 (autocast)";
  if (o.repeat > 1) std::cout << " (the fastest of " << o.repeat << " runs of each)";
  std::cout << "\n\n";
  const int nodes = o.quick ? 2 : 4;
  std::vector<ModelCase> cases = {mlp_case(o)};
  if (!o.quick) cases.insert(cases.begin(), nanogpt_case(o));
  json out = json::array();
  Rows rows;
  for (const auto& c : cases) {
    const int64_t steps = o.quick ? 4 : c.name == "nanogpt" ? 20 : 200;
    json spec = training_spec(c, nodes, steps, c.batch_size, "diloco", diloco_options());
    spec["kind"] = "simulator";
    std::map<std::string, std::vector<double>> loops;
    for (int i = 0; i < o.repeat; ++i) {
      for (const char* precision : {"fp32", "bf16"}) {  // alternating, so noise spreads over both
        spec["precision"] = precision;
        loops[precision].push_back(measure(o, spec)["loop_seconds"]);
      }
    }
    const double fp32 = fastest(loops["fp32"]), bf16 = fastest(loops["bf16"]);
    out.push_back({{"model", c.name},
                   {"nodes", nodes},
                   {"steps", steps},
                   {"fp32_steps_per_second", steps / fp32},
                   {"bf16_steps_per_second", steps / bf16},
                   {"speedup", fp32 / bf16}});
    rows.push_back({c.name, std::to_string(nodes), std::to_string(steps), fmt(steps / fp32, 2), fmt(steps / bf16, 2),
                    fmt(fp32 / bf16, 2) + "x"});
  }
  print_table({"model", "K", "steps", "fp32 steps/s", "bf16 steps/s", "bf16 speed-up"}, rows);
  return out;
}

json nanogpt16_section(const BenchOptions& o) {
  const ModelCase gpt = o.quick ? mlp_case(o) : nanogpt_case(o);
  const int nodes = o.quick ? 2 : 16;
  std::cout << nodes << " " << gpt.name << " nodes, DiLoCo (H = 10, AdamW inner): the simulator against a bare loop "
            << "doing the same work, and peak memory against " << nodes << " single replicas";
  if (o.repeat > 1) std::cout << " (the fastest of " << o.repeat << " runs of each)";
  std::cout << "\n\n";
  const int64_t steps = o.quick ? 4 : 20;
  const double dataset = dataset_bytes(o, gpt.data);
  json spec = training_spec(gpt, nodes, steps, gpt.batch_size, "diloco", diloco_options());
  if (o.quick) spec["strategy_options"]["H"] = 2;  // outer steps within the quick run
  const SideBySide runs = side_by_side(o, spec);
  const json &sim = runs.simulator.back(), &bare = runs.bare.back();
  const std::vector<double> sim_runs = field(runs.simulator, "loop_seconds"),
                            bare_runs = field(runs.bare, "loop_seconds");
  // What one replica takes training alone in the bare loop: its parameters,
  // gradients and AdamW moments, and one step's activations (with the
  // allocator's slack around them, which a real process has too).
  json alone = training_spec(gpt, 1, o.quick ? 2 : 5, gpt.batch_size, "allreduce", adamw_options());
  alone["kind"] = "bare";
  const json one = measure(o, alone);
  const double one_replica = one["peak_rss"].get<double>() - one["base_rss"].get<double>() - dataset;
  const double state = state_bytes(sim["parameters"], 2);
  const double used = sim["peak_rss"].get<double>() - sim["base_rss"].get<double>() - dataset;
  const double sim_s = fastest(sim_runs), bare_s = fastest(bare_runs);
  const json out = {{"model", gpt.name},
                    {"nodes", nodes},
                    {"steps", steps},
                    {"simulator_loop_seconds", sim_s},
                    {"bare_loop_seconds", bare_s},
                    {"throughput_ratio", bare_s / sim_s},
                    {"simulator_runs_seconds", sim_runs},
                    {"bare_runs_seconds", bare_runs},
                    // Node 0's; the same work gives the same loss.
                    {"simulator_last_loss", sim["last_loss"]},
                    {"bare_last_loss", bare["last_loss"]},
                    {"state_bytes_per_node", state},
                    {"activation_bytes", one_replica - state},
                    {"one_replica_bytes", one_replica},
                    {"peak_rss_bytes", sim["peak_rss"]},
                    {"bytes_beyond_dataset", used},
                    {"memory_ratio", used / (nodes * one_replica)}};
  print_table({"model", "K", "steps", "bare_s", "sim_s", "throughput", "state/node", "activations", "peak_rss",
               "beyond dataset", "of K x one replica"},
              {{gpt.name, std::to_string(nodes), std::to_string(steps), fmt(bare_s, 2), fmt(sim_s, 2),
                fmt(bare_s / sim_s, 3), format_bytes(state), format_bytes(one_replica - state),
                format_bytes(sim["peak_rss"]), format_bytes(used), fmt(used / (nodes * one_replica), 2)}});
  return out;
}

json demo_section(const BenchOptions& o) {
  std::cout << "DeMo's compression per node-step (momentum update in the DCT domain and top-32 selection, chunks of "
               "64) against the model's forward and backward passes: one node, batch 64";
  if (o.repeat > 1) std::cout << " (the fastest of " << o.repeat << " runs)";
  std::cout << "\n\n";
  const ModelCase mlp = mlp_case(o);
  json spec = {{"kind", "demo"},   {"model", mlp.name},          {"model_options", mlp.model_options},
               {"data", mlp.data}, {"steps", o.quick ? 8 : 200}, {"batch_size", 64}};
  std::vector<double> passes, compression;
  for (int i = 0; i < o.repeat; ++i) {
    const json run = measure(o, spec);
    passes.push_back(run["forward_backward_seconds"]);
    compression.push_back(run["compression_seconds"]);
  }
  const double pass_s = fastest(passes), compression_s = fastest(compression);
  print_table({"model", "forward+backward ms", "compression ms", "compression/passes"},
              {{mlp.name, fmt(1e3 * pass_s, 3), fmt(1e3 * compression_s, 3), fmt(compression_s / pass_s, 2)}});
  return {{"model", mlp.name},
          {"forward_backward_seconds", pass_s},
          {"compression_seconds", compression_s},
          {"ratio", compression_s / pass_s}};
}

json nonfinite_section(const BenchOptions& o) {
  std::cout << "The non-finite check (train.on_nonfinite): a pass over one replica's parameters against a step\n\n";
  json out = json::array();
  Rows rows;
  for (const ModelCase& model :
       o.quick ? std::vector<ModelCase>{mlp_case(o)} : std::vector<ModelCase>{mlp_case(o), nanogpt_case(o)}) {
    const int64_t steps = o.quick ? 4 : 40;
    json spec = training_spec(model, 1, steps, model.batch_size, "allreduce", adamw_options());
    spec["kind"] = "nonfinite";
    const double check_s = measure(o, spec)["check_seconds"];
    spec["kind"] = "simulator";
    const double step_s = measure(o, spec)["loop_seconds"].get<double>() / static_cast<double>(steps);
    out.push_back({{"model", model.name}, {"check_seconds", check_s}, {"step_seconds", step_s}});
    rows.push_back({model.name, fmt(1e3 * check_s, 3), fmt(1e3 * step_s, 2), fmt(100 * check_s / step_s, 2) + " %"});
  }
  print_table({"model", "check_ms", "step_ms (1 node)", "check/step"}, rows);
  return out;
}

}  // namespace exogym::bench
