#include "checkpoint_fixtures.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "exogym/runtime/command/resume.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/train/training.h"
#include "helpers.h"
#include "testing.h"

namespace exogym::test {

namespace fs = std::filesystem;
using nlohmann::json;

json checkpointed_manifest(int nodes, int64_t interval) {
  json m = small_manifest(nodes);
  m["checkpoint"] = {{"interval", interval}};
  m["compute"] = {{"step_time", "10ms"}};
  return m;
}

std::vector<std::pair<std::string, json>> builtin_strategies() {
  return {
      {"allreduce", {{"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}, {"max_norm", 1.0}}},
      {"fedavg", {{"H", 3}, {"island_size", 2}, {"optimizer", {{"name", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}}}}},
      {"diloco", {{"H", 4}, {"optimizer", {{"name", "adam"}, {"lr", 0.01}}}}},
      {"sparta", {{"p", 0.2}, {"selector", "partitioned"}, {"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}}},
      {"sparta_diloco", {{"p", 0.2}, {"selector", "shuffled_sequential"}, {"H", 3}, {"sparta_interval", 2}}},
      {"demo", {{"compression_topk", 4}, {"compression_chunk", 8}, {"lr", 0.01}}},
      // Fragment 1 sends after steps 1, 5, 9, ... and applies 2 steps later:
      // a run stopped after 7 steps has fp4 outer gradients in flight.
      {"streaming_diloco",
       {{"H", 4},
        {"fragments", 2},
        {"tau", 2},
        {"alpha", 0.5},
        {"quantize", "fp4"},
        {"optimizer", {{"name", "adam"}, {"lr", 0.01}}}}},
      // Syncs after steps 2, 5, 8, ...: a run stopped after 7 steps has an
      // average in flight, and each node its own eager master.
      {"overlapped_diloco", {{"H", 3}, {"update", "eager"}, {"optimizer", {{"name", "adam"}, {"lr", 0.01}}}}},
      // Syncs after steps 2, 5, 8, ...: every resume point has error buffers
      // that are not zero. Chunks of 64 (the MLP's largest tensor has 1024
      // values) keep 7.
      {"sparseloco", {{"H", 3}, {"chunk", 64}, {"density", 0.1}, {"optimizer", {{"name", "adam"}, {"lr", 0.01}}}}},
      // Parameters after every 2nd step, moments after every 3rd and 5th:
      // at a stop after 7 steps each holds something else on each node.
      {"desloc", {{"Kx", 2}, {"Ku", 3}, {"Kv", 5}, {"optimizer", {{"name", "adam"}, {"lr", 0.01}}}}},
      // Its anchor is the model of the round: saved, resumed and sent to a
      // node that comes back.
      {"fedprox", {{"H", 3}, {"mu", 0.1}, {"optimizer", {{"name", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}}}}},
      // Pairs exchange after steps 2, 5, 8, ...: every resume point has
      // slow weights and momenta that differ between nodes.
      {"noloco", {{"H", 3}, {"outer_momentum", 0.5}, {"optimizer", {{"name", "adam"}, {"lr", 0.01}}}}},
      // Rounds end after steps 2, 5, 8, ...: every resume point has a
      // server variate and a variate per node (per client with
      // participation) that are not zero.
      {"scaffold", {{"H", 3}, {"optimizer", {{"name", "sgd"}, {"lr", 0.05}}}}},
  };
}

std::vector<std::pair<std::string, json>> async_strategies() {
  const json adam = {{"name", "adam"}, {"lr", 0.01}};
  return {
      {"async_diloco", {{"H", 3}, {"delay", 2}, {"optimizer", adam}}},
      {"fedbuff", {{"H", 3}, {"buffer", 2}, {"optimizer", adam}}},
  };
}

json async_population_manifest(const json& speeds) {
  json m = checkpointed_manifest(3, 5);
  m["checkpoint"]["keep"] = 5;
  m["strategy"] = {{"plugin", "fedbuff"},
                   {"options", {{"H", 2}, {"buffer", 2}, {"optimizer", {{"name", "adam"}, {"lr", 0.01}}}}}};
  m["compute"] = {{"step_time", "1s"}, {"speed_distribution", {{"name", "tiers"}, {"values", speeds}}}};
  m["network"] = {{"bandwidth", "1000000TB/s"}, {"latency", "150ms"}};
  m["data"]["train"]["partition"] = {{"name", "dirichlet"}, {"alpha", 0.5}};
  m["participation"] = {{"clients", 30}, {"per_round", 3}};
  m["train"]["max_steps"] = 24;
  return m;
}

json timed_churn_manifest() {
  json m = checkpointed_manifest(6, 6);
  m["strategy"] = {{"plugin", "diloco"}, {"options", {{"H", 4}, {"optimizer", {{"name", "adamw"}, {"lr", 0.01}}}}}};
  m["train"]["max_steps"] = 40;
  m["network"] = {{"failure_timeout", "50ms"}};
  m["churn"] = {{"mtbf", "1s"}, {"downtime", "300ms"}};
  return m;
}

runtime::train::TrainingResult train_into(const json& manifest, const fs::path& run_dir) {
  auto set = runtime::manifest::parse_manifest(manifest, run_dir.parent_path(), "test");
  runtime::train::TrainingOptions options;
  options.progress = runtime::output::Progress::Mode::Quiet;
  options.run_dir = run_dir;
  return runtime::train::train_run(set.runs.at(0), test_loader(), options);
}

runtime::train::TrainingResult resume_in(const fs::path& run_dir, const std::vector<std::string>& overrides,
                                         std::optional<int64_t> from_step) {
  auto set = runtime::command::resumed_manifest(run_dir, overrides);
  runtime::train::TrainingOptions options;
  options.progress = runtime::output::Progress::Mode::Quiet;
  options.run_dir = run_dir;
  options.resume = true;
  options.from_step = from_step;
  return runtime::train::train_run(set.runs.at(0), test_loader(), options);
}

namespace {

// summary.json without what depends on the wall clock or the folder, nor
// how the nodes computed (stacked or per node: the same run).
json deterministic_summary(const fs::path& run_dir) {
  json summary = json::parse(read_text(run_dir / "summary.json"));
  for (const char* key : {"wall_seconds", "steps_per_second", "tokens_per_second", "timing", "run_dir", "execution"})
    summary.erase(key);
  if (summary.contains("target") && summary["target"].is_object()) summary["target"].erase("wall_seconds");
  return summary;
}

// metrics.csv's rows: within a step, nodes record from their own threads in
// whatever order they get there, so the rows are compared as a sorted list.
}  // namespace

void require_same_run(const fs::path& expected, const fs::path& actual) {
  REQUIRE(fs::exists(actual / "model.pt"));
  CHECK(read_text(expected / "model.pt") == read_text(actual / "model.pt"));
  for (const char* csv : {"train.csv", "validation.csv", "comm.csv"}) {
    INFO(csv);
    CHECK(read_text(expected / csv) == read_text(actual / csv));
  }
  if (fs::exists(expected / "events.csv"))
    CHECK(read_text(expected / "events.csv") == read_text(actual / "events.csv"));
  CHECK(sorted_lines(expected / "metrics.csv") == sorted_lines(actual / "metrics.csv"));
  CHECK(deterministic_summary(expected).dump(2) == deterministic_summary(actual).dump(2));
}

}  // namespace exogym::test
