#include "exogym/runtime/train/outputs.h"

#include <torch/version.h>

#include <string>

#include "exogym/runtime/output/report/report.h"
#include "exogym/runtime/output/run_folder.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/runtime/train/checkpoint_state.h"
#include "exogym/runtime/train/checkpointing.h"
#include "exogym/runtime/train/run_context.h"
#include "exogym/runtime/train/training_outputs.h"
#include "exogym/runtime/train/training_setup.h"

namespace exogym::runtime::train {

using nlohmann::json;

namespace {

// config.json: the manifest with every default filled in, the plugins'
// options included, and how the runtime laid the run out.
json resolved_config(const RunContext& run, const TrainingSetup& setup, const std::filesystem::path& run_dir,
                     const threads::ThreadPlan& plan, bool partial_reduce) {
  json config = run.m.resolved;
  config["model"]["options"] = setup.plugins.model_options;
  config["strategy"]["options"] = setup.plugins.strategy_options;
  config["data"]["train"]["options"] = setup.data.train_options;
  if (eval_enabled(run.m)) config["data"]["val"]["options"] = setup.data.val_options;
  if (run.m.participation) config["participation"]["round"] = setup.plugins.round_steps;  // the strategy's H, or given
  config["runtime"] = {{"parallelism", plan.parallelism}, {"threads_per_node", plan.threads},
                       {"pinned", plan.pinned},           {"cores", plan.cores},
                       {"libtorch", TORCH_VERSION},       {"run_dir", run_dir.string()}};
  // The plugin files loaded: --resume finds them there (command/resume.h).
  config["runtime"]["plugin_files"] = {{"model", setup.plugins.model->description().file.string()},
                                       {"strategy", setup.plugins.strategy->description().file.string()}};
  if (run.role.mesh) {
    // parallelism, threads and cores above are process 0's.
    config["runtime"]["processes"] = run.role.processes;
    config["runtime"]["reduce"] = partial_reduce ? "partial" : "exact";
  }
  return config;
}

std::string run_title(const manifest::Manifest& m) {
  const std::string sub = m.run_subdir().generic_string();
  return sub.empty() ? m.name : m.name + "/" + sub;
}

}  // namespace

void choose_run_folder(const RunContext& run, const TrainingSetup& setup, TrainingOutputs& outputs,
                       const threads::ThreadPlan& plan, const TrainingOptions& options) {
  if (options.resume)
    outputs.run_dir = options.run_dir;
  else if (run.role.writes)
    outputs.run_dir = options.run_dir.empty() ? output::create_run_folder(run.m.run_dir()) : options.run_dir;
  outputs.config = resolved_config(run, setup, outputs.run_dir, plan, options.partial_reduce);
}

void open_outputs(const RunContext& run, const TrainingSetup& setup, const CheckpointState& checkpoints,
                  TrainingOutputs& outputs, const TrainingOptions& options) {
  const manifest::Manifest& m = run.m;
  const bool writes = run.role.writes;
  const std::optional<checkpoint::LoadedCheckpoint>& resume = checkpoints.resume;
  if (writes) {
    if (resume) cut_outputs_to_checkpoint(outputs.run_dir, resume->index);
    outputs.writer =
        std::make_unique<output::RunWriter>(outputs.run_dir, setup.metric_names,
                                            /*append=*/resume.has_value(), /*faults=*/m.varies_membership());
    outputs.writer->write_config(outputs.config);
    outputs.writer->write_data(setup.data.node_data);
  } else {
    outputs.metric_buffer = std::make_unique<MetricBuffer>();
    outputs.relay = std::make_unique<ReportRelay>();
  }
  const std::string label = run_title(m);
  outputs.progress = std::make_unique<output::Progress>(
      label, m.max_steps, writes ? options.progress : output::Progress::Mode::Quiet, checkpoints.first_step);
  if (writes) {
    run.log->info("{}: {} nodes of {} ({} parameters) with strategy {}, {} steps{}; {} {}", label, m.nodes,
                  m.model.plugin, setup.parameters, m.strategy.plugin, m.max_steps,
                  run.role.mesh ? " over " + std::to_string(run.role.processes) + " processes" : std::string(),
                  resume ? "resuming from " + resume->folder.string() + ", in" : std::string("writing"),
                  outputs.run_dir.string());
  }
}

void write_run_report(const RunContext& run, const TrainingOutputs& outputs) {
  if (!run.role.writes || !outputs.writer) return;
  output::report::write_report({outputs.run_dir}, outputs.run_dir / "report.html", run_title(run.m));
}

bool remove_untrained_run_folder(const RunContext& run, TrainingOutputs& outputs, int nodes_started,
                                 const TrainingOptions& options) noexcept {
  // Resumed, the folder is the user's; with every node of this process
  // past init(), it records training (or an error during it) worth keeping.
  if (options.resume || !run.role.writes || outputs.run_dir.empty() || nodes_started == run.role.block.count)
    return false;
  outputs.writer.reset();  // closes its files first
  std::error_code ec;
  std::filesystem::remove_all(outputs.run_dir, ec);
  if (ec && run.log) {
    run.log->warn("could not remove {}, a run that did not start: {}", outputs.run_dir.string(), ec.message());
  }
  return !ec;
}

void write_stopped_run_report(const RunContext& run, TrainingOutputs& outputs) noexcept {
  if (!run.role.writes || !outputs.writer) return;
  try {
    outputs.writer.reset();  // closes (and so flushes) every CSV file
    output::report::write_report({outputs.run_dir}, outputs.run_dir / "report.html", run_title(run.m));
  } catch (const std::exception& e) {
    if (run.log) run.log->warn("no report.html for {}: {}", outputs.run_dir.string(), e.what());
  }
}

}  // namespace exogym::runtime::train
