#include "exogym/runtime/command/run_command.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "exogym/runtime/command/resume.h"
#include "exogym/runtime/command/variants_runner.h"
#include "exogym/runtime/dist/launcher.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/host/cores.h"
#include "exogym/runtime/host/interrupt.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/manifest/seeds.h"
#include "exogym/runtime/train/cluster.h"
#include "exogym/runtime/train/training.h"

namespace exogym::runtime::command {

namespace {

// The manifest, or the run folder's configuration when resuming.
manifest::ManifestSet load(const RunCommand& command) {
  if (!command.resume.empty()) return resumed_manifest(command.resume, command.overrides);
  std::vector<std::string> overrides = command.overrides;
  for (auto& assignment : manifest::seed_overrides(command.seeds)) overrides.push_back(std::move(assignment));
  return manifest::load_manifest(command.manifest, overrides);
}

// The table of a comparison, or a single run's final losses.
void print_result(const manifest::ManifestSet& set, const VariantsResult& result, output::Progress::Mode progress) {
  if (progress == output::Progress::Mode::Jsonl) {
    // stdout carries JSON lines only; the table is in comparison.txt.
    const nlohmann::json done = {{"event", "done"}, {"name", set.name}, {"outputs", result.folder.string()}};
    std::printf("%s\n", done.dump().c_str());
    return;
  }
  if (!result.table.empty()) {
    std::printf("\n%s\n%s", set.name.c_str(), result.table.c_str());
  } else if (!result.runs.empty() && result.runs.front().final_eval) {
    const auto& r = result.runs.front();
    std::printf("%s: final local loss %.4f, global loss %.4f", r.name.c_str(), r.final_eval->local.loss,
                r.final_eval->global.loss);
    for (size_t i = 0; i < r.metric_names.size(); ++i) {
      std::printf(", global %s %.4f", r.metric_names[i].c_str(), r.final_eval->global.metrics[i]);
    }
    std::printf(" (%.1f s)\n", r.wall_seconds);
  }
  std::printf("outputs: %s\n", result.folder.string().c_str());
}

// Checks the manifest once here, so that a mistake is reported once rather
// than by every process, then starts and supervises the processes.
int launch(const RunCommand& command, plugin::PluginLoader& loader) {
  const auto set = load(command);
  for (const auto& run : set.runs) train::check_run(run, loader, command.nproc);
  dist::LaunchSpec spec;
  spec.processes = command.nproc;
  spec.args = command.child_args;
  spec.master_addr = "127.0.0.1";
  spec.master_port = command.explicit_master_port ? command.world.master_port : 0;
  spec.grace = command.world.timeout + std::chrono::seconds(5);
  return dist::launch_local(spec);
}

// One process of several: connects to the others, runs its block of nodes,
// and tells the others why if it fails.
int run_in_mesh(const RunCommand& command, const manifest::ManifestSet& set, plugin::PluginLoader& loader,
                VariantsOptions options) {
  auto mesh = std::make_unique<dist::ProcessMesh>(command.world, run_fingerprint(set, command.only));
  try {
    options.mesh = mesh.get();
    options.partial_reduce = command.world.partial_reduce;
    // Processes on one host share its cores and memory.
    options.cores = std::max(1, host::available_cores() / command.world.local_size);
    options.host_processes = command.world.local_size;
    const VariantsResult result = run_variants(set, loader, options);
    mesh->finish();
    if (command.world.rank == 0) print_result(set, result, command.progress);
    return 0;
  } catch (const std::exception& e) {
    // Ctrl-C reached every process; one that stopped in a collective because
    // a peer stopped first was interrupted too.
    const bool interrupted = dynamic_cast<const host::Interrupted*>(&e) != nullptr || host::interrupt_requested();
    const std::string reason =
        interrupted ? "interrupted by a signal (" + host::interrupt_signal_text() + ")" : e.what();
    mesh->fail(reason);  // the others name this process themselves
    if (interrupted && !dynamic_cast<const host::Interrupted*>(&e)) {
      throw host::Interrupted(reason + " (" + e.what() + ")");
    }
    // A signal sent to another process alone (SIGTERM to one host's
    // process) stopped the run: here too it is an interruption, naming that
    // process, not a failure of this one.
    if (!interrupted && std::string(e.what()).find(" failed: interrupted by a signal") != std::string::npos)
      throw host::Interrupted(std::string("stopped: ") + e.what());
    throw;
  }
}

}  // namespace

int run_command(const RunCommand& command, plugin::PluginLoader& loader) {
  if (!command.resume.empty()) find_recorded_plugins(command.resume, loader);
  if (command.nproc > 0) return launch(command, loader);
  host::install_interrupt_handlers();
  const auto set = load(command);
  VariantsOptions options;
  options.progress = command.progress;
  options.only = command.only;
  options.resume_dir = command.resume;
  options.from_step = command.from_step;
  options.force = command.force;
  if (command.world.distributed()) return run_in_mesh(command, set, loader, options);
  print_result(set, run_variants(set, loader, options), command.progress);
  return 0;
}

}  // namespace exogym::runtime::command
