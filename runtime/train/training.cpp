#include "exogym/runtime/train/training.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "exogym/runtime/async/async_processes.h"
#include "exogym/runtime/checkpoint/client_states.h"
#include "exogym/runtime/host/block_cache.h"
#include "exogym/runtime/host/cores.h"
#include "exogym/runtime/host/devices.h"
#include "exogym/runtime/host/host_memory.h"
#include "exogym/runtime/host/malloc_tuning.h"
#include "exogym/runtime/output/folder_lock.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/runtime/threads/thread_plan.h"
#include "exogym/runtime/train/checkpointing.h"
#include "exogym/runtime/train/cluster.h"
#include "exogym/runtime/train/divergence.h"
#include "exogym/runtime/train/node_loop.h"
#include "exogym/runtime/train/outputs.h"
#include "exogym/runtime/train/setup.h"
#include "exogym/runtime/train/summary.h"
#include "exogym/runtime/train/training_state.h"
#include "exogym/runtime/util/exception_text.h"
#include "exogym/sdk/strategy.h"

namespace exogym::runtime::train {

namespace {

std::shared_ptr<spdlog::logger> logger() {
  auto log = spdlog::get("exogym");
  return log ? log : spdlog::stderr_color_mt("exogym");
}

// Lays this process's cores out for its nodes: the thread plan
// (thread_plan.h), and malloc tuned for that many cores.
threads::ThreadPlan prepare_cores(const RunContext& run, int cores) {
  const manifest::Manifest& m = run.m;
  const threads::ThreadPlan plan = threads::plan_threads(
      {run.role.block.count, cores, m.parallelism, m.threads, m.pin_threads}, host::available_cores());
  if (!host::tune_malloc_for_training(plan.cores)) run.log->debug("malloc settings left as they are");
  if (!host::install_block_cache()) run.log->debug("LibTorch's CPU allocator left as it is (EXOGYM_CPU_BLOCK_CACHE=0)");
  if (plan.oversubscribed()) {
    run.log->warn("parallelism {} × threads {} exceeds the {} cores: OpenMP teams will contend and slow the run down",
                  plan.parallelism, plan.threads, plan.cores);
  }
  return plan;
}

// A node's intra-op team larger than the cores cannot run at once; a
// million threads never step (each OpenMP team is made, and spins, per node).
void check_threads(const manifest::Manifest& m, int cores) {
  if (m.threads <= cores) return;
  throw sdk::ConfigError("threads", std::to_string(m.threads) + " intra-op threads per computing node, but this " +
                                        "process has " + std::to_string(cores) + " cores; at most " +
                                        std::to_string(cores) + " (0: the cores shared out among the nodes)");
}

MemoryBudget memory_budget(const TrainingOptions& options) {
  MemoryBudget budget;
  budget.available = host::available_memory();
  if (budget.available) *budget.available /= static_cast<uint64_t>(std::max(1, options.host_processes));
  budget.force = options.force;
  return budget;
}

int64_t parameter_count(sdk::Model& model) {
  int64_t count = 0;
  for (const auto& p : model.network().parameters()) count += p.numel();
  return count;
}

// summary.json of a run that stopped on divergence, saying why and where.
// One process alone has every node's account; over several processes the
// error reaches every process, and gathering the accounts needs them all, so
// only the error says it. It takes the whole state, as the run's result
// reads every part of it (run_result).
void write_diverged_summary(TrainingState& s, const Diverged& diverged) {
  const RunContext& run = s.run;
  if (!run.role.writes || run.role.mesh) return;
  TrainingResult result = run_result(s);
  result.steps = diverged.step();
  result.examples_trained = diverged.step() * run.m.batch_size * run.m.nodes;
  if (s.membership->simulated())
    result.examples_trained = s.membership->examples_trained(diverged.step(), run.m.batch_size);
  if (result.faults) result.faults = s.membership->totals(diverged.step());
  if (result.participation) result.participation = s.membership->participation_totals(diverged.step());
  result.stopped = diverged.what();
  write_summary(run, s.setup, *s.simulation, *s.membership, *s.outputs.writer, result,
                gather_accounts(*s.simulation, *s.membership, s.outputs.metric_buffer.get(), run.role.mesh));
}

// Who is alive from the first step on; a resumed run is checked against its
// checkpoint first, before anything in its folder changes. A step of the
// outline, it fills several parts of the state (checkpoints, reports,
// clocks, membership).
void start_membership(TrainingState& s, const TrainingOptions& options) {
  const RunContext& run = s.run;
  CheckpointState& checkpoints = s.checkpoints;
  if (options.resume) {
    load_resume_point(run, s.setup, s.outputs.config, s.simulation->clocks(), checkpoints, s.reported, options);
  }
  s.membership = std::make_unique<Membership>(run.m, checkpoints.first_step, s.setup.plugins.round_steps, run.role.mesh,
                                              s.setup.data.client_slots);
  std::optional<checkpoint::LoadedCheckpoint>& resume = checkpoints.resume;
  // A strategy with state of its clients keeps it between their rounds
  // (read and checked with the checkpoint).
  if (keeps_client_states(run.m, s.setup)) {
    s.membership->keep_client_states();
    if (resume) s.membership->client_store()->restore(std::move(resume->clients));
  }
  if (!resume || !resume->index.sections.contains("faults")) return;
  try {
    s.membership->restore(resume->index.sections.at("faults"));
  } catch (const nlohmann::json::exception& e) {
    throw sdk::DataError((resume->folder / checkpoint::kIndexFile).string() +
                         ": sections.faults: not the state of the failures (" + util::without_json_prefix(e.what()) +
                         ")");
  }
}

}  // namespace

void DatasetCache::end_run() {
  for (auto it = entries.begin(); it != entries.end();) it = used.count(it->first) ? std::next(it) : entries.erase(it);
  used.clear();
}

std::vector<std::string> check_run(const manifest::Manifest& m, plugin::PluginLoader& loader, int processes) {
  check_processes(m, processes);
  host::resolve_devices(m.device);
  return load_plugins(m, loader).warnings;
}

TrainingResult train_run(const manifest::Manifest& m, plugin::PluginLoader& loader, const TrainingOptions& options) {
  TrainingState s(m, process_role(m, options.mesh));
  const RunContext& run = s.run;
  TrainingSetup& setup = s.setup;
  TrainingOutputs& outputs = s.outputs;
  s.loop.mark_step = options.timing_mark_step;
  s.run.log = logger();
  check_threads(m, options.cores > 0 ? options.cores : host::available_cores());

  // Everything that can be wrong with the manifest is found before training.
  setup.devices = host::resolve_devices(m.device);
  host::use_reproducible_kernels(setup.devices);
  setup.plugins = load_plugins(m, loader);
  setup.data = load_data(m, loader, run.role, options.dataset_cache, setup.plugins.model_options);
  setup.accumulation = m.batch_size / m.minibatch_size;

  const threads::ThreadPlan plan = prepare_cores(run, options.cores);
  setup.replicas = build_replicas(m, setup.plugins, setup.devices, run.role.block, plan.cores, memory_budget(options));
  setup.stacks = std::make_unique<NodeStacks>(
      m, setup.replicas, setup.devices, run.role.block,
      "model plugin \"" + m.model.plugin + "\" (" + setup.plugins.model->description().file.string() + ")");
  sdk::Model& first_model = *setup.replicas.models[run.role.block.first];
  setup.metric_names = first_model.metric_names();
  setup.parameters = parameter_count(first_model);

  s.simulation = std::make_unique<Meters>(m, run.role.block);
  if (run.role.mesh) s.simulation->async().share_with(async::share_async_news(*run.role.mesh));
  choose_run_folder(run, setup, outputs, plan, options);
  // Before the folder is read for a resume: a second exogym-run on it stops
  // here, with nothing changed.
  if (run.role.writes && std::filesystem::is_directory(outputs.run_dir))
    outputs.folder_lock = std::make_unique<output::FolderLock>(outputs.run_dir);
  try {
    start_membership(s, options);
    open_outputs(run, setup, s.checkpoints, outputs, options);
    prepare_checkpoints(run, setup.plugins, outputs, s.checkpoints);
    try {
      run_nodes(s, plan, !options.partial_reduce);
    } catch (const Diverged& diverged) {
      outputs.progress->finish();
      write_diverged_summary(s, diverged);
      throw;
    }
    outputs.progress->finish();

    // Every node's account, and the metrics other processes kept, go to the
    // process that writes the run folder.
    const NodeAccounts accounts =
        gather_accounts(*s.simulation, *s.membership, outputs.metric_buffer.get(), run.role.mesh);
    TrainingResult result = run_result(s);
    if (run.role.writes) write_summary(run, setup, *s.simulation, *s.membership, *outputs.writer, result, accounts);
    write_run_report(run, outputs);
    return result;
  } catch (...) {
    // A stopped or failed run keeps a report of what it reached; one that
    // never trained leaves no folder.
    if (!remove_untrained_run_folder(run, outputs, s.nodes_started.load(), options))
      write_stopped_run_report(run, outputs);
    throw;
  }
}

}  // namespace exogym::runtime::train
