#include "exogym/runtime/train/outputs.h"

#include <torch/version.h>

#include <string>

#include "exogym/runtime/output/run_folder.h"

namespace exogym::runtime::train {

using nlohmann::json;

namespace {

// config.json: the manifest with every default filled in, the plugins'
// options included, and how the runtime laid the run out.
json resolved_config(const RunState& s, const cluster::ThreadPlan& plan, bool partial_reduce) {
  json config = s.m.resolved;
  config["model"]["options"] = s.plugins.model_options;
  config["strategy"]["options"] = s.plugins.strategy_options;
  config["data"]["train"]["options"] = s.data.train_options;
  if (eval_enabled(s.m)) config["data"]["val"]["options"] = s.data.val_options;
  config["runtime"] = {{"parallelism", plan.parallelism}, {"threads_per_node", plan.threads},
                       {"pinned", plan.pinned},           {"cores", plan.cores},
                       {"libtorch", TORCH_VERSION},       {"run_dir", s.run_dir.string()}};
  if (s.role.mesh) {
    // parallelism, threads and cores above are process 0's.
    config["runtime"]["processes"] = s.role.processes;
    config["runtime"]["reduce"] = partial_reduce ? "partial" : "exact";
  }
  return config;
}

}  // namespace

void open_outputs(RunState& s, const cluster::ThreadPlan& plan, const RunOptions& options) {
  const manifest::Manifest& m = s.m;
  const bool writes = s.role.writes;
  if (writes) {
    s.run_dir = options.run_dir.empty() ? output::create_run_folder(m.run_dir()) : options.run_dir;
    s.writer = std::make_unique<output::RunWriter>(s.run_dir, s.metric_names);
    s.writer->write_config(resolved_config(s, plan, options.partial_reduce));
  } else {
    s.metric_buffer = std::make_unique<MetricBuffer>();
  }
  const std::string label = m.variant.empty() ? m.name : m.name + "/" + m.variant;
  s.progress =
      std::make_unique<output::Progress>(label, m.max_steps, writes ? options.progress : output::Progress::Mode::Quiet);
  if (writes) {
    s.log->info("{}: {} nodes of {} ({} parameters) with strategy {}, {} steps{}; writing {}", label, m.nodes,
                m.model.plugin, s.parameters, m.strategy.plugin, m.max_steps,
                s.role.mesh ? " over " + std::to_string(s.role.processes) + " processes" : std::string(),
                s.run_dir.string());
  }
}

}  // namespace exogym::runtime::train
