#include "exogym/runtime/train/outputs.h"

#include <torch/version.h>

#include <string>

#include "exogym/runtime/output/report/report.h"
#include "exogym/runtime/output/run_folder.h"
#include "exogym/runtime/train/checkpointing.h"

namespace exogym::runtime::train {

using nlohmann::json;

namespace {

// config.json: the manifest with every default filled in, the plugins'
// options included, and how the runtime laid the run out.
json resolved_config(const TrainingState& s, const threads::ThreadPlan& plan, bool partial_reduce) {
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

std::string run_title(const manifest::Manifest& m) {
  const std::string sub = m.run_subdir().generic_string();
  return sub.empty() ? m.name : m.name + "/" + sub;
}

}  // namespace

void choose_run_folder(TrainingState& s, const threads::ThreadPlan& plan, const TrainingOptions& options) {
  if (options.resume)
    s.run_dir = options.run_dir;
  else if (s.role.writes)
    s.run_dir = options.run_dir.empty() ? output::create_run_folder(s.m.run_dir()) : options.run_dir;
  s.config = resolved_config(s, plan, options.partial_reduce);
}

void open_outputs(TrainingState& s, const TrainingOptions& options) {
  const manifest::Manifest& m = s.m;
  const bool writes = s.role.writes;
  if (writes) {
    if (s.resume) cut_outputs_to_checkpoint(s);
    s.writer = std::make_unique<output::RunWriter>(s.run_dir, s.metric_names, /*append=*/s.resume.has_value(),
                                                   /*faults=*/m.has_faults());
    s.writer->write_config(s.config);
    s.writer->write_data(s.data.node_data);
  } else {
    s.metric_buffer = std::make_unique<MetricBuffer>();
    s.relay = std::make_unique<ReportRelay>();
  }
  const std::string label = run_title(m);
  s.progress = std::make_unique<output::Progress>(
      label, m.max_steps, writes ? options.progress : output::Progress::Mode::Quiet, s.first_step);
  if (writes) {
    s.log->info("{}: {} nodes of {} ({} parameters) with strategy {}, {} steps{}; {} {}", label, m.nodes,
                m.model.plugin, s.parameters, m.strategy.plugin, m.max_steps,
                s.role.mesh ? " over " + std::to_string(s.role.processes) + " processes" : std::string(),
                s.resume ? "resuming from " + s.resume->folder.string() + ", in" : std::string("writing"),
                s.run_dir.string());
  }
}

void write_run_report(TrainingState& s) {
  if (!s.role.writes || !s.writer) return;
  output::report::write_report({s.run_dir}, s.run_dir / "report.html", run_title(s.m));
}

bool remove_untrained_run_folder(TrainingState& s, const TrainingOptions& options) noexcept {
  // Resumed, the folder is the user's; with every node of this process
  // past init(), it records training (or an error during it) worth keeping.
  if (options.resume || !s.role.writes || s.run_dir.empty() || s.nodes_started.load() == s.role.block.count)
    return false;
  s.writer.reset();  // closes its files first
  std::error_code ec;
  std::filesystem::remove_all(s.run_dir, ec);
  if (ec && s.log) s.log->warn("could not remove {}, a run that did not start: {}", s.run_dir.string(), ec.message());
  return !ec;
}

void write_stopped_run_report(TrainingState& s) noexcept {
  if (!s.role.writes || !s.writer) return;
  try {
    s.writer.reset();  // closes (and so flushes) every CSV file
    output::report::write_report({s.run_dir}, s.run_dir / "report.html", run_title(s.m));
  } catch (const std::exception& e) {
    if (s.log) s.log->warn("no report.html for {}: {}", s.run_dir.string(), e.what());
  }
}

}  // namespace exogym::runtime::train
